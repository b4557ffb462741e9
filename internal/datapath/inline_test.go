package datapath

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Every map lookup of the programs on the request path is inlined by the
// verifier. A call site that sees several maps is not: a switch over the
// rule classes, whose lookups the compiler merged into one call, went
// through the generic bpf_map_lookup_elem helper, an indirect call of about
// 40 ns per lookup (santa_own_lookup in maps.h).
func TestMapLookupsAreInlined(t *testing.T) {
	d := openTest(t)
	generic := kernelCallImm(t, "bpf_map_lookup_elem")
	for name, prog := range map[string]*ebpf.Program{
		"santa_udp":          d.objs.SantaUdp,
		"santa_udp_tc":       d.objs.SantaUdpTc,
		"santa_tcp_verdict":  d.tcp.objs.SantaTcpVerdict,
		"santa_tcp_reply":    d.tcp.objs.SantaTcpReply,
		"santa_tcp_hold_fin": d.tcp.objs.SantaTcpHoldFin,
	} {
		info, err := prog.Info()
		if err != nil {
			t.Fatal(err)
		}
		insns, err := info.Instructions()
		if err != nil {
			t.Fatalf("%s: verified instructions: %v", name, err)
		}
		calls := 0
		for _, ins := range insns {
			if ins.OpCode.JumpOp() == asm.Call && ins.Src == asm.R0 && ins.Constant == generic {
				calls++
			}
		}
		if calls != 0 {
			t.Errorf("%s: %d map lookups through the generic helper, not inlined", name, calls)
		}
	}
}

// kernelCallImm is the immediate the verifier gives a call of the kernel
// function sym: its address relative to __bpf_call_base (/proc/kallsyms).
func kernelCallImm(t *testing.T, sym string) int64 {
	t.Helper()
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	addrs := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || (fields[2] != sym && fields[2] != "__bpf_call_base") {
			continue
		}
		if _, seen := addrs[fields[2]]; seen {
			continue
		}
		if addrs[fields[2]], err = strconv.ParseUint(fields[0], 16, 64); err != nil {
			t.Fatal(err)
		}
	}
	if addrs[sym] == 0 || addrs["__bpf_call_base"] == 0 {
		t.Fatalf("/proc/kallsyms has no address for %s or __bpf_call_base (kptr_restrict?)", sym)
	}
	return int64(int32(addrs[sym] - addrs["__bpf_call_base"]))
}
