package model

// Where the data plane runs by default.
const (
	// DefaultPinPath is where the maps, programs and links are pinned.
	DefaultPinPath = "/sys/fs/bpf/santa"
	// DefaultCgroupPath is the cgroup v2 hierarchy santa_sock_release
	// attaches to.
	DefaultCgroupPath = "/sys/fs/cgroup"
)

// The data plane's default capacities (santa_abi.h's
// SANTA_DEFAULT_MAX_RULES, SANTA_DEFAULT_MAX_SERVICES and
// SANTA_DEFAULT_MAX_CONNS): the sizes of its maps unless santad's
// configuration sets others. Written again here, not generated, so that
// this package builds without the BPF objects; internal/datapath's
// TestABIConstants checks them against santa_abi.h.
const (
	DefaultMaxRules       = 1 << 20 // rules on the host
	DefaultMaxServices    = 4096    // sockets attached on the host
	DefaultMaxConnections = 65536   // TCP connections the data plane serves at once
)

// Santa's socket option (santa_abi.h's SANTA_SOL, "SANT", and
// SANTA_SO_ACCEPTED), which an application sets on a connection right
// after accept(): the kernel never sees it, a BPF hook takes it
// (docs/tcp.md). Checked against santa_abi.h like the capacities above,
// and against the SDKs' copies through testdata/protocol/vectors.json.
const (
	SockoptLevel    = 0x53414e54
	SockoptAccepted = 1
)

// XDPMode says how santa_udp runs on an interface.
type XDPMode string

const (
	XDPNative  XDPMode = "native"  // in the driver, before any skb exists
	XDPGeneric XDPMode = "generic" // on the skb, for drivers without XDP
	XDPNone    XDPMode = "none"    // TC only
)

// Attachment tells where the data plane runs on one interface.
type Attachment struct {
	Interface string
	XDP       XDPMode
	TC        bool // santa_udp_tc on ingress: always, for what XDP cannot answer
}

// ConnOwner is whose connection places a TCP listener's connections take
// (docs/tcp.md, "Connection places"): its uid's, of which the uid holds
// at most Limit at once across all its listeners (0: as many as the
// host has, MaxConnections). A listener registered with no owner (nil)
// takes places of no uid's, without limit.
type ConnOwner struct {
	UID   uint32
	Limit uint32
}

// ConnPlaces are the connection places one uid holds (ConnOwner): its
// connections under Santa, and its memcached connections' stream states,
// which last until the application closes the socket.
type ConnPlaces struct {
	Conns, Memcached uint32
	Limit            uint32 // 0: none but the host's
}
