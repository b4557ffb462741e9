package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/santa-offload/santa/bench/rig"
)

// Ports nginx serves the same files on, by variant: without and with
// sendfile (the paper's Figure 8 has both), and without sendfile with
// Santa on its listening socket.
var ports = map[string]int{"off": 8080, "on": 8081, "santa": 8082}

// sendfileOf is nginx's sendfile setting of a variant.
func sendfileOf(variant string) string {
	if variant == "on" {
		return "on"
	}
	return "off"
}

// nginxConfig writes nginx's configuration into dir, one file of each size
// in dir/www (size.bin, size bytes of body), and returns the command line
// that runs it in the foreground. One worker; tuned as the paper's:
// keep-alive for the whole run, no access log, open file cache. It accepts
// every pending connection at once (multi_accept), as the figures in
// docs/benchmarks.md were measured.
func nginxConfig(dir, ip string, sizes []int) ([]string, error) {
	www := filepath.Join(dir, "www")
	if err := os.MkdirAll(www, 0o755); err != nil {
		return nil, err
	}
	for _, size := range sizes {
		if err := os.WriteFile(filepath.Join(www, fmt.Sprintf("%d.bin", size)), body(size), 0o644); err != nil {
			return nil, err
		}
	}
	var servers bytes.Buffer
	for _, variant := range variants {
		fmt.Fprintf(&servers, "    server { listen %s:%d; root %s; sendfile %s; tcp_nopush %[4]s; }\n", ip, ports[variant], www, sendfileOf(variant))
	}
	conf := filepath.Join(dir, "nginx.conf")
	err := os.WriteFile(conf, rig.NginxConf(dir, "worker_processes 1;", "worker_connections 4096; multi_accept on;", `    access_log off;
    keepalive_requests 1000000000;
    keepalive_timeout 300s;
    tcp_nodelay on;
    open_file_cache max=64;
    types { application/octet-stream bin; }
    default_type application/octet-stream;
`+servers.String()), 0o644)
	return []string{"nginx", "-p", dir, "-c", conf}, err
}

// body is a reply body of size bytes.
func body(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}
