package model

// Where the data plane runs by default.
const (
	// DefaultPinPath is where the maps, programs and links are pinned.
	DefaultPinPath = "/sys/fs/bpf/santa"
	// DefaultCgroupPath is the cgroup v2 hierarchy santa_sock_release
	// attaches to.
	DefaultCgroupPath = "/sys/fs/cgroup"
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
