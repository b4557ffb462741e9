package daemon

import (
	"reflect"
	"strings"
)

// reloadable are the configuration keys a running santad takes over on
// a reload (SIGHUP): who is an admin and the quotas, which only decide
// what later requests may do. Every other key shapes what santad set up
// at start (the socket, the pins, the maps' sizes, the attached
// interfaces, the metrics listener) and takes a restart, which keeps the
// data plane answering anyway.
var reloadable = map[string]bool{
	"admin_group": true, "quota_rules": true, "quota_bytes": true, "quota_services": true,
	"quota_connections": true, "quota_tcp_connections": true, "quotas": true,
}

// Reload takes over cfg's reloadable keys, all or none: a configuration
// santad cannot run with is refused and the running one stays. It returns
// the keys whose change waits for a restart. A lowered quota refuses
// what would exceed it from now on; what a uid holds already stays (its
// TCP connections beyond a lowered quota stay under Santa, its new ones
// are the application's until it holds fewer).
func (s *Server) Reload(cfg Config) (restartKeys []string, err error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	q, admins, err := cfg.access()
	if err != nil {
		return nil, err
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	restartKeys = changedKeys(s.running, cfg, func(key string) bool { return !reloadable[key] })
	s.mu.Lock()
	s.quotas = q
	s.applyConnLimits()
	s.mu.Unlock()
	s.connMu.Lock()
	s.connQuota = cfg.QuotaConnections
	s.connMu.Unlock()
	s.adminGroup.Store(admins)
	// The keys that wait for a restart keep their running values, so
	// that the next reload reports them again.
	next := s.running
	v, n := reflect.ValueOf(&next).Elem(), reflect.ValueOf(cfg)
	for i := range v.NumField() {
		if reloadable[jsonKey(v.Type().Field(i))] {
			v.Field(i).Set(n.Field(i))
		}
	}
	s.running = next
	return restartKeys, nil
}

// changedKeys lists the keys, among those pick takes, whose values differ
// between a and b.
func changedKeys(a, b Config, pick func(key string) bool) []string {
	var out []string
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		key := jsonKey(va.Type().Field(i))
		if pick(key) && !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, key)
		}
	}
	return out
}

func jsonKey(f reflect.StructField) string {
	return strings.Split(f.Tag.Get("json"), ",")[0]
}
