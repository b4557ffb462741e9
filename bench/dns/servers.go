package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// A server is a DNS server from Debian's packages, run with one worker
// thread, no rate limiting, authoritative for the zone only.
type server struct {
	name string
	// config writes the configuration into dir (zone file: dir/zone) and
	// returns the command line that runs the server in the foreground.
	config func(dir, ip string) ([]string, error)
}

var servers = map[string]server{
	"bind": {"bind", bindConfig},
	"knot": {"knot", knotConfig},
	"nsd":  {"nsd", nsdConfig},
}

func bindConfig(dir, ip string) ([]string, error) {
	conf := filepath.Join(dir, "named.conf")
	err := os.WriteFile(conf, fmt.Appendf(nil, `options {
	directory "%[1]s";
	pid-file "%[1]s/named.pid";
	session-keyfile "%[1]s/session.key";
	listen-on port 53 { %[2]s; };
	listen-on-v6 { none; };
	recursion no;
	notify no;
	dnssec-validation no;
};
zone "%[3]s" { type primary; file "%[1]s/zone"; };
`, dir, ip, zoneName), 0o644)
	// -g: foreground, log to stderr; -n 1: one worker thread.
	return []string{"named", "-g", "-n", "1", "-c", conf}, err
}

func knotConfig(dir, ip string) ([]string, error) {
	conf := filepath.Join(dir, "knot.conf")
	err := os.WriteFile(conf, fmt.Appendf(nil, `server:
    rundir: "%[1]s"
    user: root:root
    listen: %[2]s@53
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "%[1]s"
log:
  - target: stderr
    any: warning
zone:
  - domain: %[3]s
    file: "%[1]s/zone"
    storage: "%[1]s"
    journal-content: none
    zonefile-sync: -1
`, dir, ip, zoneName), 0o644)
	return []string{"knotd", "-c", conf}, err
}

func nsdConfig(dir, ip string) ([]string, error) {
	conf := filepath.Join(dir, "nsd.conf")
	err := os.WriteFile(conf, fmt.Appendf(nil, `server:
    ip-address: %[2]s@53
    server-count: 1
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
    control-enable: no
zone:
    name: %[3]s
    zonefile: zone
`, dir, ip, zoneName), 0o644)
	// -d: foreground.
	return []string{"nsd", "-d", "-c", conf}, err
}
