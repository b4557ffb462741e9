package rules

// Limits of the data plane's index, from santa_abi.h's enum santa_limit
// (the limits of a rule itself are the rule package's). Written again here
// so that this package builds without the BPF objects; internal/datapath's
// TestABIConstants checks every one.
const (
	MaxRegionLen = 64 // SANTA_MAX_REGION_LEN: bytes hashed for a root lookup
	MaxExtendLen = 64 // SANTA_MAX_EXTEND_LEN: bytes hashed per deeper level
	MaxDepth     = 4  // SANTA_MAX_DEPTH: index levels below a root
	NodeSlots    = 4  // SANTA_NODE_SLOTS: candidates in one index node

	// SlotNone (SANTA_SLOT_NONE) ends a node's slot list in the kernel, so
	// no rule may be stored in slot 0.
	SlotNone = 0
)
