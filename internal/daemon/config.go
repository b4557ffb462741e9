package daemon

import (
	"fmt"
	"os"
	"strconv"

	"github.com/santa-offload/santa/internal/jsonfile"
	"github.com/santa-offload/santa/internal/model"
)

// Config is santad's configuration: a JSON file (docs/operations.md names
// every key), then flags over it.
type Config struct {
	// Socket is the Unix socket clients connect to.
	Socket string `json:"socket"`
	// SocketMode is the socket's permission bits, in octal ("0660").
	SocketMode string `json:"socket_mode"`
	// SocketGroup owns the socket: a group name or number. Empty: "santa"
	// if that group exists, else santad's own group.
	SocketGroup string `json:"socket_group"`
	// Interfaces to attach the data plane to. Empty: every interface that
	// is up when santad starts.
	Interfaces []string `json:"interfaces"`
	// PinPath is the bpffs directory of the data plane's pins.
	PinPath string `json:"pin_path"`
	// StateDir holds the journal and the lock file.
	StateDir string `json:"state_dir"`
	// CgroupPath is the cgroup v2 hierarchy whose sockets are watched.
	CgroupPath string `json:"cgroup_path"`
	// MaxRules and MaxServices are the host's capacities.
	MaxRules    uint32 `json:"max_rules"`
	MaxServices uint32 `json:"max_services"`
	// ReplyTTL is the TTL / hop limit of the data plane's replies.
	ReplyTTL uint8 `json:"reply_ttl"`
	// AdminGroup, a group name or number, makes the clients that were in
	// it when they connected admins, besides uid 0. Empty: none.
	AdminGroup string `json:"admin_group"`
	// QuotaRules and QuotaBytes bound what each non-admin uid installs,
	// QuotaServices how many sockets it attaches (0: unlimited); Quotas
	// overrides them per uid.
	QuotaRules    uint32           `json:"quota_rules"`
	QuotaBytes    uint64           `json:"quota_bytes"`
	QuotaServices uint32           `json:"quota_services"`
	Quotas        map[string]Quota `json:"quotas"`
	// QuotaConnections bounds the connections to santad each non-admin
	// uid holds open at once (0: unlimited): each costs santad a
	// descriptor and a message buffer.
	QuotaConnections uint32 `json:"quota_connections"`
	// QuotaTCPConnections bounds the connections each non-admin uid's
	// TCP listeners have under Santa at once (0: unlimited, but for the
	// host's 65,536): beyond it, their new connections are the
	// application's alone (docs/tcp.md, "Connection places").
	QuotaTCPConnections uint32 `json:"quota_tcp_connections"`
	// MetricsAddr, if set, serves Prometheus metrics over HTTP there.
	MetricsAddr string `json:"metrics_addr"`
}

// Quota bounds what one uid holds: its rules, their bytes (pattern plus
// reply length), its services and its TCP listeners' connections under
// Santa. 0 is unlimited. Services or TCPConnections left out of a quotas
// entry (nil) is QuotaServices or QuotaTCPConnections: an entry written
// before the key existed must not lift the limit.
type Quota struct {
	Rules          uint32  `json:"rules"`
	Bytes          uint64  `json:"bytes"`
	Services       *uint32 `json:"services,omitempty"`
	TCPConnections *uint32 `json:"tcp_connections,omitempty"`
}

// DefaultConfig is the configuration without a file or flags.
func DefaultConfig() Config {
	return Config{
		Socket:      "/run/santa/santa.sock",
		SocketMode:  "0660",
		PinPath:     model.DefaultPinPath,
		StateDir:    "/run/santa/state",
		CgroupPath:  model.DefaultCgroupPath,
		MaxRules:    model.DefaultMaxRules,
		MaxServices: model.DefaultMaxServices,
		ReplyTTL:    64,
		QuotaRules:  65536,
		QuotaBytes:  64 << 20,
		// A server rarely needs more than a few sockets; 64 uids at
		// their quota fill the default max_services.
		QuotaServices:    64,
		QuotaConnections: 64,
		// A sixteenth of the host's 65,536 places under Santa: it takes
		// 16 uids at their quota to fill them, and a uid whose clients
		// hold more idle connections than that has offload for those
		// first (docs/operations.md, "Resource limits").
		QuotaTCPConnections: model.DefaultMaxConnections / 16,
	}
}

// LoadConfig reads a JSON configuration file over the defaults; a key the
// file leaves out keeps its default, an unknown key is an error, and so is
// anything after the JSON object (a second object pasted in, a stray
// brace), which would otherwise be ignored.
func LoadConfig(path string) (Config, error) {
	cfg := DefaultConfig()
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("reading config: %w", err)
	}
	if err := jsonfile.Decode(data, &cfg); err != nil {
		return cfg, fmt.Errorf("parsing config %s: %w", path, err)
	}
	return cfg, nil
}

// check refuses settings santad cannot run with.
func (c Config) check() error {
	if c.Socket == "" || c.StateDir == "" || c.PinPath == "" || c.CgroupPath == "" {
		return fmt.Errorf("socket, state_dir, pin_path and cgroup_path must be set")
	}
	if _, err := c.socketMode(); err != nil {
		return err
	}
	if c.MaxRules == 0 || c.MaxServices == 0 || c.ReplyTTL == 0 {
		return fmt.Errorf("max_rules, max_services and reply_ttl must be at least 1")
	}
	if _, err := c.adminGroup(); err != nil {
		return err
	}
	_, err := c.quotas()
	return err
}

// access is who is an admin and the quotas: what NewServer starts with
// and Reload replaces.
func (c Config) access() (quotaPolicy, int64, error) {
	q, err := c.quotas()
	if err != nil {
		return q, 0, err
	}
	admins, err := c.adminGroup()
	return q, admins, err
}

// adminGroup is the gid AdminGroup names, or noAdminGroup.
func (c Config) adminGroup() (int64, error) {
	if c.AdminGroup == "" {
		return noAdminGroup, nil
	}
	gid, err := groupID(c.AdminGroup)
	if err != nil {
		return 0, fmt.Errorf("admin_group %q: %w", c.AdminGroup, err)
	}
	return int64(gid), nil
}

func (c Config) socketMode() (os.FileMode, error) {
	m, err := strconv.ParseUint(c.SocketMode, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf("socket_mode %q is not octal permission bits like 0660", c.SocketMode)
	}
	return os.FileMode(m), nil
}

// quotas is the quota policy the configuration describes.
func (c Config) quotas() (quotaPolicy, error) {
	services, conns := c.QuotaServices, c.QuotaTCPConnections
	p := quotaPolicy{def: Quota{Rules: c.QuotaRules, Bytes: c.QuotaBytes, Services: &services, TCPConnections: &conns},
		byUID: map[uint32]Quota{}}
	for uid, q := range c.Quotas {
		n, err := strconv.ParseUint(uid, 10, 32)
		if err != nil {
			return p, fmt.Errorf("quotas: key %q is not a uid", uid)
		}
		if q.Services == nil {
			q.Services = &services
		}
		if q.TCPConnections == nil {
			q.TCPConnections = &conns
		}
		p.byUID[uint32(n)] = q
	}
	return p, nil
}
