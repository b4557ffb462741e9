package datapath

import (
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/rules"
	"github.com/santa-offload/santa/rule"
)

// The packages that build without the BPF objects (rule, internal/rules,
// internal/model) write santa_abi.h's shared constants again; bpf2go emits
// the originals. Every enumerator of santa_abi.h's shared-constant enums is
// listed here, with its Go copy or as the data plane's alone, so that a new
// one cannot go unchecked. The SDKs' copies of SANTA_SOL are checked
// against model's through testdata/protocol/vectors.json.
func TestABIConstants(t *testing.T) {
	copies := map[string]struct{ abi, copy int }{
		"SANTA_LIMIT_MAX_REGIONS":    {int(santaSantaLimitSANTA_LIMIT_MAX_REGIONS), rule.MaxRegions},
		"SANTA_LIMIT_MAX_DEPTH":      {int(santaSantaLimitSANTA_LIMIT_MAX_DEPTH), rules.MaxDepth},
		"SANTA_MAX_REGION_LEN":       {int(santaSantaLimitSANTA_MAX_REGION_LEN), rules.MaxRegionLen},
		"SANTA_MAX_EXTEND_LEN":       {int(santaSantaLimitSANTA_MAX_EXTEND_LEN), rules.MaxExtendLen},
		"SANTA_NODE_SLOTS":           {int(santaSantaLimitSANTA_NODE_SLOTS), rules.NodeSlots},
		"SANTA_MAX_COND_LEN":         {int(santaSantaLimitSANTA_MAX_COND_LEN), rule.MaxCondLen},
		"SANTA_MAX_COND_END":         {int(santaSantaLimitSANTA_MAX_COND_END), rule.MaxCondEnd},
		"SANTA_MAX_PROCESSORS":       {int(santaSantaLimitSANTA_MAX_PROCESSORS), rule.MaxProcessors},
		"SANTA_MAX_COPIES":           {int(santaSantaLimitSANTA_MAX_COPIES), rule.MaxCopies},
		"SANTA_MAX_COPY_LEN":         {int(santaSantaLimitSANTA_MAX_COPY_LEN), rule.MaxCopyLen},
		"SANTA_MAX_UDP_REPLY":        {int(santaSantaLimitSANTA_MAX_UDP_REPLY), rule.MaxUDPReply},
		"SANTA_MAX_TCP_REPLY":        {int(santaSantaLimitSANTA_MAX_TCP_REPLY), rule.MaxTCPReply},
		"SANTA_DEFAULT_MAX_RULES":    {int(santaSantaDefaultCapacitySANTA_DEFAULT_MAX_RULES), model.DefaultMaxRules},
		"SANTA_DEFAULT_MAX_SERVICES": {int(santaSantaDefaultCapacitySANTA_DEFAULT_MAX_SERVICES), model.DefaultMaxServices},
		"SANTA_DEFAULT_MAX_CONNS":    {int(santaSantaDefaultCapacitySANTA_DEFAULT_MAX_CONNS), model.DefaultMaxConnections},
		"SANTA_SOL":                  {int(santaSantaSockoptSANTA_SOL), model.SockoptLevel},
		"SANTA_SO_ACCEPTED":          {int(santaSantaSockoptSANTA_SO_ACCEPTED), model.SockoptAccepted},
		"SANTA_SLOT_NONE":            {int(santaSantaSlotLayoutSANTA_SLOT_NONE), rules.SlotNone},
		"SANTA_LEARN_MAX_KEY":        {int(santaSantaLearnLayoutSANTA_LEARN_MAX_KEY), model.MaxLearnKey},
		"SANTA_LEARN_MAX_OFF":        {int(santaSantaLearnLayoutSANTA_LEARN_MAX_OFF), model.MaxLearnOffset},
		"SANTA_MAX_UDP_REQUEST":      {int(santaSantaLimitSANTA_MAX_UDP_REQUEST), rule.MaxUDPRequest},
		"SANTA_MAX_TCP_REQUEST":      {int(santaSantaLimitSANTA_MAX_TCP_REQUEST), rule.MaxTCPRequest},
		"SANTA_PARSER_NONE":          {int(santaSantaParserSANTA_PARSER_NONE), int(model.ParserNone)},
		"SANTA_PARSER_MEMCACHED":     {int(santaSantaParserSANTA_PARSER_MEMCACHED), int(model.ParserMemcached)},
	}
	// The learning tables' sizes: user space reads them from the maps.
	dataPlaneOnly := map[string]bool{"SANTA_SCRATCH_LEN": true, "SANTA_DEFAULT_LEARN_ENTRIES": true, "SANTA_DEFAULT_LEARN_WATCH": true}
	for name, c := range copies {
		if c.abi != c.copy {
			t.Errorf("%s: santa_abi.h has %d, Go %d", name, c.abi, c.copy)
		}
	}

	spec, err := loadSanta()
	if err != nil {
		t.Fatal(err)
	}
	for _, enum := range []string{"santa_limit", "santa_default_capacity", "santa_sockopt", "santa_parser"} {
		var e *btf.Enum
		if err := spec.Types.TypeByName(enum, &e); err != nil {
			t.Fatalf("enum %s: %v", enum, err)
		}
		for _, v := range e.Values {
			if _, ok := copies[v.Name]; !ok && !dataPlaneOnly[v.Name] {
				t.Errorf("enum %s: %s has no Go copy here, nor is it the data plane's alone", enum, v.Name)
			}
		}
	}
}

// Every exit of santa_udp has a name in the path counters, and every
// service counter a field of model.ServiceStats that sums it: a new
// enumerator cannot go uncounted.
func TestABICounters(t *testing.T) {
	names := map[string]bool{}
	for p := santaSantaPath(0); p < santaSantaPathSANTA_PATH_NCOUNTERS; p++ {
		name, ok := pathNames[p]
		if !ok || names[name] {
			t.Errorf("path %d has no name of its own (%q)", p, name)
		}
		names[name] = true
	}
	var st model.ServiceStats
	fields := serviceCounters(&st)
	seen := map[*uint64]bool{}
	for c := santaSantaServiceCounter(0); c < santaSantaServiceCounterSANTA_SVC_NCOUNTERS; c++ {
		f, ok := fields[c]
		if !ok || seen[f] {
			t.Errorf("service counter %d has no field of its own", c)
		}
		seen[f] = true
	}
}

// A reply goes to the smallest class that holds it, and the class stays in
// its slot next to the slot's number.
func TestRuleClasses(t *testing.T) {
	small, medium := len(santaSantaRuleSmall{}.Reply), len(santaSantaRuleMedium{}.Reply)
	for _, c := range []struct {
		reply int
		want  santaSantaRuleClass
	}{
		{1, smallRule}, {small, smallRule}, {small + 1, mediumRule},
		{medium, mediumRule}, {medium + 1, largeRule}, {rule.MaxUDPReply, largeRule},
	} {
		if got := classOf(c.reply); got != c.want {
			t.Errorf("classOf(%d) = %v, want %v", c.reply, got, c.want)
		}
		slot := classSlot(12345, c.want)
		if slotNumber(slot) != 12345 || slotClass(slot) != c.want {
			t.Errorf("slot %#x of class %v: number %d, class %v", slot, c.want, slotNumber(slot), slotClass(slot))
		}
	}
}
