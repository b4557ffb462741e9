package dnstest

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// Kind is a DNS server from Debian's packages.
type Kind string

const (
	BIND Kind = "bind" // bind9: named, rndc
	Knot Kind = "knot" // knot: knotd, knotc
	NSD  Kind = "nsd"  // nsd: nsd, nsd-control
)

// Kinds are every kind.
var Kinds = []Kind{BIND, Knot, NSD}

// A kind's programs, configuration and operator's reload.
type kind struct {
	server, control string
	// config writes the configuration into c.Dir (zone files: zoneFile)
	// and returns the command line that runs the server in the
	// foreground.
	config func(c Config) ([]string, error)
	// reload is the operator's command that reloads zone (origin without
	// the final dot) from its file.
	reload func(c Config, zone string) []string
	// forks: a reload starts new server processes, and the old ones
	// answer the old data until they end, after the new ones answer.
	forks bool
}

var kinds = map[Kind]kind{
	BIND: {"named", "rndc", bindConfig, func(c Config, zone string) []string {
		return []string{"rndc", "-c", filepath.Join(c.Dir, "rndc.conf"), "reload", zone}
	}, false},
	Knot: {"knotd", "knotc", knotConfig, func(c Config, zone string) []string {
		return []string{"knotc", "-s", filepath.Join(c.Dir, "knot.sock"), "zone-reload", zone + "."}
	}, false},
	NSD: {"nsd", "nsd-control", nsdConfig, func(c Config, zone string) []string {
		return []string{"nsd-control", "-c", filepath.Join(c.Dir, "nsd.conf"), "reload", zone}
	}, true},
}

// zoneFile is where a zone's file is in the server's directory.
func zoneFile(dir, origin string) string {
	return filepath.Join(dir, strings.TrimSuffix(origin, ".")+".zone")
}

// bindConfig: named in the foreground (-g, logging to stderr), -n worker
// threads, rndc on 127.0.0.1:953 of the namespace with a fresh key.
func bindConfig(c Config) ([]string, error) {
	secret := make([]byte, 32)
	rand.Read(secret)
	key := fmt.Sprintf("key \"rndc-key\" { algorithm hmac-sha256; secret \"%s\"; };\n", base64.StdEncoding.EncodeToString(secret))
	rndc := key + "options { default-key \"rndc-key\"; default-server 127.0.0.1; default-port 953; };\n"
	if err := os.WriteFile(filepath.Join(c.Dir, "rndc.conf"), []byte(rndc), 0o600); err != nil {
		return nil, err
	}
	v4, v6 := listIPs(c.Addrs, false, "; "), listIPs(c.Addrs, true, "; ")
	conf := fmt.Sprintf(`%s
controls { inet 127.0.0.1 port 953 allow { 127.0.0.1; } keys { "rndc-key"; }; };
options {
	directory "%[2]s";
	pid-file "%[2]s/named.pid";
	session-keyfile "%[2]s/session.key";
	listen-on port 53 { %[3]s };
	listen-on-v6 port 53 { %[4]s };
	recursion no;
	notify no;
	dnssec-validation no;
};
`, key, c.Dir, orNone(v4), orNone(v6))
	for _, z := range zoneOrigins {
		conf += fmt.Sprintf("zone \"%s\" { type primary; file \"%s\"; };\n", z, zoneFile(c.Dir, z))
	}
	path := filepath.Join(c.Dir, "named.conf")
	return []string{"named", "-g", "-n", fmt.Sprint(c.Threads), "-c", path}, os.WriteFile(path, []byte(conf), 0o644)
}

// knotConfig: knotd as root, c.Threads UDP workers, no journal, zone files
// never written back, knotc on a socket in the directory; in XDP mode on
// c.XDP if set (Knot starts an XDP worker per queue of the interface
// besides its UDP workers).
func knotConfig(c Config) ([]string, error) {
	var listen []string
	for _, a := range c.Addrs {
		listen = append(listen, a.String()+"@53")
	}
	var xdp string
	if c.XDP != "" {
		xdp = fmt.Sprintf("xdp:\n    listen: %s@53\n    udp: on\n", c.XDP)
	}
	conf := fmt.Sprintf(`server:
    rundir: "%[1]s"
    user: root:root
    listen: [ %[2]s ]
    udp-workers: %[3]d
    tcp-workers: 1
    background-workers: 1
%[4]scontrol:
    listen: "%[1]s/knot.sock"
database:
    storage: "%[1]s"
log:
  - target: stderr
    any: warning
template:
  - id: default
    storage: "%[1]s"
    journal-content: none
    zonefile-sync: -1
zone:
`, c.Dir, strings.Join(listen, ", "), c.Threads, xdp)
	for _, z := range zoneOrigins {
		conf += fmt.Sprintf("  - domain: %s\n    file: \"%s\"\n", z, zoneFile(c.Dir, z))
	}
	path := filepath.Join(c.Dir, "knot.conf")
	return []string{"knotd", "-c", path}, os.WriteFile(path, []byte(conf), 0o644)
}

// nsdConfig: nsd in the foreground (-d; it still forks xfrd and
// c.Threads server processes), as root, no database, no rate limit,
// nsd-control on a socket in the directory.
func nsdConfig(c Config) ([]string, error) {
	conf := "server:\n"
	for _, a := range c.Addrs {
		conf += fmt.Sprintf("    ip-address: %s@53\n", a)
	}
	conf += fmt.Sprintf(`    server-count: %[2]d
    username: ""
    chroot: ""
    zonesdir: "%[1]s"
    database: ""
    pidfile: "%[1]s/nsd.pid"
    xfrdfile: "%[1]s/xfrd.state"
    zonelistfile: "%[1]s/zone.list"
    cookie-secret-file: "%[1]s/cookie.secret"
    rrl-ratelimit: 0
    verbosity: 0
remote-control:
    control-enable: yes
    control-interface: "%[1]s/nsd.ctl"
`, c.Dir, c.Threads)
	for _, z := range zoneOrigins {
		conf += fmt.Sprintf("zone:\n    name: %s\n    zonefile: \"%s\"\n", z, zoneFile(c.Dir, z))
	}
	path := filepath.Join(c.Dir, "nsd.conf")
	return []string{"nsd", "-d", "-c", path}, os.WriteFile(path, []byte(conf), 0o644)
}

var zoneOrigins = []string{Origin, SubOrigin}

// listIPs lists the IPv6 (v6) or IPv4 addresses of addrs, each followed by
// sep.
func listIPs(addrs []netip.Addr, v6 bool, sep string) string {
	var s string
	for _, a := range addrs {
		if a.Is6() == v6 {
			s += a.String() + sep
		}
	}
	return s
}

func orNone(list string) string {
	if list == "" {
		return "none;"
	}
	return list
}
