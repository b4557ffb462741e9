package rig

import "fmt"

// NginxConf is an nginx configuration for a process of a test's or a
// benchmark's own: in the foreground, as root, with every file nginx
// writes (pid, error log, temporary bodies) under dir. main, events and
// http are the caller's directives for those contexts, one per line.
func NginxConf(dir, main, events, http string) []byte {
	return fmt.Appendf(nil, `daemon off;
user root;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
%[2]s
events { %[3]s }
http {
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[4]s}
`, dir, main, events, http)
}
