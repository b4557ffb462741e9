package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
)

type statusOptions struct{}

func (*statusOptions) flags(*flag.FlagSet) {}

func (*statusOptions) run(ctx context.Context, e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	st, err := c.Status()
	if err != nil {
		return err
	}
	s := c.Session()
	v := statusView{
		Daemon:   st.Daemon,
		Protocol: s.Version,
		Client: sessionView{
			UID: s.UID, GID: s.GID, PID: s.PID, Admin: s.Admin,
			QuotaRules: s.QuotaRules, QuotaBytes: s.QuotaBytes,
		},
		Rules:      st.Rules,
		Capacity:   st.Capacity,
		Services:   st.Services,
		Interfaces: []interfaceView{},
	}
	for _, i := range st.Interfaces {
		v.Interfaces = append(v.Interfaces, interfaceView{Ifindex: i.Ifindex, Name: i.Name, XDP: i.XDP, TC: i.TC})
	}
	return e.show(v)
}

type statusView struct {
	Daemon     string          `json:"daemon"`
	Protocol   uint16          `json:"protocol"`
	Client     sessionView     `json:"client"`
	Rules      uint32          `json:"rules"`
	Capacity   uint32          `json:"capacity"`
	Services   uint32          `json:"services"`
	Interfaces []interfaceView `json:"interfaces"`
}

// sessionView is who santad thinks santactl is.
type sessionView struct {
	UID        uint32 `json:"uid"`
	GID        uint32 `json:"gid"`
	PID        uint32 `json:"pid"`
	Admin      bool   `json:"admin"`
	QuotaRules uint32 `json:"quota_rules"`
	QuotaBytes uint64 `json:"quota_bytes"`
}

type interfaceView struct {
	Ifindex uint32 `json:"ifindex"`
	Name    string `json:"name"`
	XDP     string `json:"xdp"`
	TC      bool   `json:"tc"`
}

func (v statusView) table(w io.Writer) error {
	who := fmt.Sprintf("uid %d, gid %d, pid %d", v.Client.UID, v.Client.GID, v.Client.PID)
	if v.Client.Admin {
		who += ", admin"
	}
	t := newTable(w)
	t.row("daemon", v.Daemon)
	t.row("protocol", v.Protocol)
	t.row("client", who)
	t.row("quota", fmt.Sprintf("%s rules, %s", quota(uint64(v.Client.QuotaRules)), quotaBytes(v.Client.QuotaBytes)))
	t.row("rules", fmt.Sprintf("%d of %d", v.Rules, v.Capacity))
	t.row("services", v.Services)
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "INTERFACE", "IFINDEX", "XDP", "TC")
	for _, i := range v.Interfaces {
		t.row(i.Name, i.Ifindex, i.XDP, yesNo(i.TC))
	}
	return t.flush()
}

// quota and quotaBytes are quotas for people: 0 means none.
func quota(n uint64) string {
	if n == 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

func quotaBytes(n uint64) string {
	if n == 0 {
		return "unlimited bytes"
	}
	return bytesCell(n)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
