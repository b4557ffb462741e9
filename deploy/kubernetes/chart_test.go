package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/santa-offload/santa/internal/daemon"
	"github.com/santa-offload/santa/internal/offload/agent"
	"github.com/santa-offload/santa/internal/offload/mcagent"
)

// rendered is the chart rendered for a release, decoded.
type rendered struct {
	t    *testing.T
	rel  Release
	objs []any
}

// render renders the chart with values and decodes it strictly.
func render(t *testing.T, values map[string]any) rendered {
	t.Helper()
	rel := Release{Name: "r1", Namespace: "santa-ns"}
	out, err := Render(ChartDir, rel, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	objs, err := Decode(out)
	if err != nil {
		t.Fatalf("decode: %v\n%s", err, out)
	}
	return rendered{t: t, rel: rel, objs: objs}
}

// names are the objects' kinds and names, in order.
func (r rendered) names() []string {
	var names []string
	for _, o := range r.objs {
		switch o := o.(type) {
		case *corev1.Namespace:
			names = append(names, "Namespace/"+o.Name)
		case *corev1.ServiceAccount:
			names = append(names, "ServiceAccount/"+o.Name)
		case *corev1.ConfigMap:
			names = append(names, "ConfigMap/"+o.Name)
		case *appsv1.DaemonSet:
			names = append(names, "DaemonSet/"+o.Name)
		default:
			r.t.Fatalf("unexpected object %T", o)
		}
	}
	return names
}

// find is the object of type T named name.
func find[T interface{ GetName() string }](r rendered, name string) T {
	r.t.Helper()
	for _, o := range r.objs {
		if o, ok := o.(T); ok && o.GetName() == name {
			return o
		}
	}
	var zero T
	r.t.Fatalf("no %T named %q", zero, name)
	return zero
}

// configFile writes a ConfigMap's key to a file, for the loaders of santad
// and the agents, which take a path.
func configFile(t *testing.T, cm *corev1.ConfigMap, key string) string {
	t.Helper()
	data, ok := cm.Data[key]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s", cm.Name, key)
	}
	path := filepath.Join(t.TempDir(), key)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// santadConfig is santad's configuration from the release's ConfigMap,
// read by santad's own loader (unknown keys are errors).
func (r rendered) santadConfig() daemon.Config {
	r.t.Helper()
	cm := find[*corev1.ConfigMap](r, r.rel.Name+"-santad")
	cfg, err := daemon.LoadConfig(configFile(r.t, cm, "santad.json"))
	if err != nil {
		r.t.Fatalf("santad's loader refuses the ConfigMap: %v", err)
	}
	return cfg
}

// container is the pod's container named name.
func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

// hostMount is the host directory path is in, in container c: the
// hostPath volume mounted at a directory holding path, mounted at the
// host's own path (so that paths in santad's configuration are the host's
// too), and the mount.
func hostMount(t *testing.T, spec corev1.PodSpec, c corev1.Container, path string) corev1.VolumeMount {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath != path && !strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.HostPath == nil {
				t.Fatalf("%s: %s is on volume %s, not a hostPath: it would vanish with the pod", c.Name, path, v.Name)
			}
			if v.HostPath.Path != m.MountPath {
				t.Fatalf("%s: %s is on hostPath %s mounted at %s: the host's path differs", c.Name, path, v.HostPath.Path, m.MountPath)
			}
			return m
		}
		t.Fatalf("%s: mount %s has no volume", c.Name, m.Name)
	}
	t.Fatalf("%s: nothing of the host is mounted at %s", c.Name, path)
	return corev1.VolumeMount{}
}

// propagation is a mount's propagation mode, as written in YAML.
func propagation(p *corev1.MountPropagationMode) string {
	if p == nil {
		return "unset"
	}
	return string(*p)
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// santadCaps are the capabilities of deploy/santad.service's bounding
// set, and SYSLOG for /proc/kallsyms (TestSantadWithTheChartsCapabilities
// shows they suffice).
var santadCaps = []corev1.Capability{"BPF", "PERFMON", "NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE", "CHOWN", "FOWNER", "SYS_PTRACE", "DAC_READ_SEARCH", "SYSLOG"}

// checkCapabilities checks that c runs as root, unprivileged, with every
// capability dropped but want.
func checkCapabilities(t *testing.T, c corev1.Container, want []corev1.Capability) {
	t.Helper()
	sc := c.SecurityContext
	switch {
	case sc == nil || sc.Capabilities == nil:
		t.Fatalf("%s: no capabilities set", c.Name)
	case sc.Privileged != nil && *sc.Privileged:
		t.Errorf("%s: privileged", c.Name)
	case sc.RunAsUser == nil || *sc.RunAsUser != 0:
		t.Errorf("%s: not uid 0", c.Name)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: writable root file system", c.Name)
	}
	if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s: drops %v, not ALL", c.Name, sc.Capabilities.Drop)
	}
	got := slices.Clone(sc.Capabilities.Add)
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: adds %v, want %v", c.Name, got, want)
	}
}

// checkSantad checks the santad DaemonSet against the configuration it is
// given: everything santad writes lives on the host, the socket where the
// node's workloads reach it, the probes ask that socket.
func checkSantad(t *testing.T, r rendered, mountBPFFS bool) {
	t.Helper()
	cfg := r.santadConfig()
	ds := find[*appsv1.DaemonSet](r, r.rel.Name+"-santad")
	spec := ds.Spec.Template.Spec

	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("the selector's %s=%s is not the pod's label (%q)", k, v, ds.Spec.Template.Labels[k])
		}
	}
	if !spec.HostNetwork || !spec.HostPID {
		t.Errorf("hostNetwork %v, hostPID %v: santad serves the node's network namespace and sees its processes", spec.HostNetwork, spec.HostPID)
	}
	sa := find[*corev1.ServiceAccount](r, spec.ServiceAccountName)
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken ||
		spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("a service account token is mounted; santad never calls the API")
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tl corev1.Toleration) bool { return tl.Operator == corev1.TolerationOpExists && tl.Key == "" }) {
		t.Errorf("tolerations %v: santad belongs on every node", spec.Tolerations)
	}
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType {
		t.Errorf("update strategy %s", ds.Spec.UpdateStrategy.Type)
	}

	c := container(t, spec, "santad")
	checkCapabilities(t, c, santadCaps)
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("no resource requests: %v", c.Resources.Requests)
	}

	// santad reads the ConfigMap the release renders.
	var cfgMount corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/etc/santa" {
			cfgMount = m
		}
	}
	vol := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == cfgMount.Name })
	if vol < 0 || spec.Volumes[vol].ConfigMap == nil || spec.Volumes[vol].ConfigMap.Name != r.rel.Name+"-santad" {
		t.Fatalf("/etc/santa is not the ConfigMap %s-santad", r.rel.Name)
	}
	if !slices.Equal(c.Command, []string{"santad", "-config", "/etc/santa/santad.json"}) && !slices.Equal(c.Command, []string{"santad", "-config", "/etc/santa/santad.json", "-debug"}) {
		t.Errorf("command %q", c.Command)
	}
	data := find[*corev1.ConfigMap](r, r.rel.Name+"-santad").Data["santad.json"]
	if got, want := ds.Spec.Template.Annotations["checksum/config"], sha256Hex(strings.TrimSuffix(data, "\n")); got != want {
		t.Errorf("checksum/config %s, want %s (the configuration's)", got, want)
	}

	// The socket's directory and the journal on the host: workloads reach
	// the socket, and the journal outlives the pod.
	hostMount(t, spec, c, filepath.Dir(cfg.Socket))
	hostMount(t, spec, c, cfg.StateDir)
	// The pins on the host's bpffs, which the init container mounted
	// there (Bidirectional) and santad sees (HostToContainer).
	bpf := hostMount(t, spec, c, filepath.Dir(cfg.PinPath))
	if propagation(bpf.MountPropagation) != string(corev1.MountPropagationHostToContainer) {
		t.Errorf("bpffs mount propagation %s, want HostToContainer", propagation(bpf.MountPropagation))
	}
	if cg := hostMount(t, spec, c, cfg.CgroupPath); cg.MountPath != "/sys/fs/cgroup" {
		t.Errorf("cgroup_path %s is on %s, not the host's /sys/fs/cgroup", cfg.CgroupPath, cg.MountPath)
	}

	if mountBPFFS != (len(spec.InitContainers) == 1) {
		t.Fatalf("mountBPFFS %v, init containers %d", mountBPFFS, len(spec.InitContainers))
	}
	if mountBPFFS {
		ic := spec.InitContainers[0]
		if ic.SecurityContext == nil || ic.SecurityContext.Privileged == nil || !*ic.SecurityContext.Privileged {
			t.Error("the bpffs init container is not privileged: Bidirectional propagation needs it")
		}
		if len(ic.VolumeMounts) != 1 || ic.VolumeMounts[0].Name != bpf.Name || ic.VolumeMounts[0].MountPath != bpf.MountPath ||
			propagation(ic.VolumeMounts[0].MountPropagation) != string(corev1.MountPropagationBidirectional) {
			t.Errorf("the bpffs init container mounts %+v; want %s at %s, Bidirectional", ic.VolumeMounts, bpf.Name, bpf.MountPath)
		}
		if script := strings.Join(ic.Command, " "); !strings.Contains(script, "mount -t bpf bpf "+bpf.MountPath) {
			t.Errorf("the init container does not mount bpffs at %s: %s", bpf.MountPath, script)
		}
	}

	// Every probe asks santad on its configured socket.
	status := []string{"santactl", "-socket", cfg.Socket, "status"}
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.Exec == nil || !slices.Equal(p.Exec.Command, status) {
			t.Errorf("%s probe %+v, want exec %q", name, p, status)
		}
	}
	// A request waits behind a large batch: liveness must not kill santad
	// for a few slow answers.
	if lp := c.LivenessProbe; lp != nil && lp.PeriodSeconds*lp.FailureThreshold < 60 {
		t.Errorf("liveness gives santad %d s", lp.PeriodSeconds*lp.FailureThreshold)
	}
}

func TestDefaults(t *testing.T) {
	r := render(t, nil)
	want := []string{"ServiceAccount/r1", "ConfigMap/r1-santad", "DaemonSet/r1-santad"}
	if got := r.names(); !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
	checkSantad(t, r, true)
	// The defaults are santad's own but for what the chart must say.
	cfg, def := r.santadConfig(), daemon.DefaultConfig()
	if cfg.Socket != def.Socket || cfg.StateDir != def.StateDir || cfg.PinPath != def.PinPath || cfg.CgroupPath != def.CgroupPath ||
		cfg.MaxRules != def.MaxRules || cfg.SocketMode != def.SocketMode || len(cfg.Interfaces) != 0 {
		t.Errorf("configuration %+v differs from santad's defaults %+v", cfg, def)
	}
	for _, o := range r.objs {
		if ns := o.(interface{ GetNamespace() string }).GetNamespace(); ns != r.rel.Namespace {
			t.Errorf("%T in namespace %q, not the release's", o, ns)
		}
	}
}

func TestNamespace(t *testing.T) {
	r := render(t, map[string]any{"createNamespace": true})
	ns := find[*corev1.Namespace](r, r.rel.Namespace)
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace labels %v: santad's pod needs the privileged Pod Security level", ns.Labels)
	}
	if r.names()[0] != "Namespace/"+r.rel.Namespace {
		t.Errorf("the Namespace is not first: %v", r.names())
	}
}

// TestMovedPaths moves every path santad uses: the mounts follow.
func TestMovedPaths(t *testing.T) {
	r := render(t, map[string]any{
		"mountBPFFS": false,
		"hostPaths":  map[string]any{"runDir": "/var/run/santa-x", "bpffs": "/sys/fs/bpf"},
		"santad": map[string]any{
			"debug": true,
			"config": map[string]any{
				"socket":       "/var/run/santa-x/sock/santa.sock",
				"state_dir":    "/var/run/santa-x/state",
				"pin_path":     "/sys/fs/bpf/santa-x",
				"socket_group": "5353",
				"interfaces":   []any{"eth0", "lo"},
				"metrics_addr": "127.0.0.1:9477",
				"max_rules":    2048,
				"quotas":       map[string]any{"1000": map[string]any{"rules": 10}},
			},
		},
	})
	checkSantad(t, r, false)
	cfg := r.santadConfig()
	if cfg.SocketGroup != "5353" || cfg.MaxRules != 2048 || !slices.Equal(cfg.Interfaces, []string{"eth0", "lo"}) ||
		cfg.MetricsAddr != "127.0.0.1:9477" || cfg.Quotas["1000"].Rules != 10 {
		t.Errorf("configuration %+v is not the values'", cfg)
	}
	ds := find[*appsv1.DaemonSet](r, "r1-santad")
	if c := container(t, ds.Spec.Template.Spec, "santad"); c.Command[len(c.Command)-1] != "-debug" {
		t.Errorf("debug: command %q", c.Command)
	}
}

// TestDNSAgent renders a santa-offload dns node agent: its configuration
// is the agent's (strict loader, Validate), it reaches santad's socket,
// and it runs where santad's sockets are.
func TestDNSAgent(t *testing.T) {
	r := render(t, map[string]any{"offloadAgents": []any{map[string]any{
		"name":         "knot",
		"kind":         "dns",
		"nodeSelector": map[string]any{"dns.example.com/knot": "true"},
		"config": map[string]any{
			"cgroup":              "kubepods.slice",
			"port":                5353,
			"uniform_answers":     true,
			"trusted_local_binds": true, // 5353 is any user's to bind
			"max_rules":           500,
			"window":              "2s",
		},
	}}})
	want := []string{"ServiceAccount/r1", "ConfigMap/r1-santad", "ConfigMap/r1-offload-knot", "DaemonSet/r1-santad", "DaemonSet/r1-offload-knot"}
	if got := r.names(); !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
	checkSantad(t, r, true)
	cfg, err := agent.LoadConfig(configFile(t, find[*corev1.ConfigMap](r, "r1-offload-knot"), "offload.json"))
	if err != nil {
		t.Fatalf("the agent's loader refuses its ConfigMap: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the agent refuses its configuration: %v", err)
	}
	if cfg.Cgroup != "kubepods.slice" || cfg.Port != 5353 || cfg.MaxRules != 500 {
		t.Errorf("agent configuration %+v is not the values'", cfg)
	}
	if santad := r.santadConfig(); cfg.Socket != santad.Socket {
		t.Errorf("the agent's socket %s is not santad's %s", cfg.Socket, santad.Socket)
	}

	ds := find[*appsv1.DaemonSet](r, "r1-offload-knot")
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork || !spec.HostPID {
		t.Errorf("hostNetwork %v, hostPID %v: the agent works in santad's network namespace on the node's processes", spec.HostNetwork, spec.HostPID)
	}
	if spec.NodeSelector["dns.example.com/knot"] != "true" {
		t.Errorf("node selector %v", spec.NodeSelector)
	}
	c := container(t, spec, "santa-offload")
	checkCapabilities(t, c, []corev1.Capability{"SYS_PTRACE", "DAC_READ_SEARCH"})
	if !slices.Equal(c.Command, []string{"santa-offload", "dns", "-config", "/etc/santa/offload.json"}) {
		t.Errorf("command %q", c.Command)
	}
	if m := hostMount(t, spec, c, filepath.Dir(cfg.Socket)); !m.ReadOnly {
		t.Error("the agent may write in santad's directory")
	}
	if cg := hostMount(t, spec, c, "/sys/fs/cgroup/"+cfg.Cgroup); cg.MountPath != "/sys/fs/cgroup" {
		t.Errorf("the server's cgroup is on %s", cg.MountPath)
	}
}

// TestMetrics: with metrics_addr set, santad's pod names its metrics port
// and carries Prometheus's scrape annotations; without, neither.
func TestMetrics(t *testing.T) {
	for _, tc := range []struct {
		addr string
		port int32
	}{{"", 0}, {":9477", 9477}, {"0.0.0.0:9100", 9100}} {
		r := render(t, map[string]any{"santad": map[string]any{"config": map[string]any{"metrics_addr": tc.addr}}})
		if got := r.santadConfig().MetricsAddr; got != tc.addr {
			t.Errorf("metrics_addr %q: santad's configuration has %q", tc.addr, got)
		}
		tmpl := find[*appsv1.DaemonSet](r, "r1-santad").Spec.Template
		c := container(t, tmpl.Spec, "santad")
		ann := tmpl.Annotations
		if tc.port == 0 {
			if len(c.Ports) != 0 || ann["prometheus.io/scrape"] != "" {
				t.Errorf("no metrics: ports %v, annotations %v", c.Ports, ann)
			}
			continue
		}
		if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != tc.port {
			t.Errorf("metrics_addr %q: ports %v", tc.addr, c.Ports)
		}
		if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != fmt.Sprint(tc.port) || ann["prometheus.io/path"] != "/metrics" {
			t.Errorf("metrics_addr %q: annotations %v", tc.addr, ann)
		}
	}
}

// TestMemcachedAgent renders a santa-offload memcached node agent: its
// configuration passes the memcached agent's own loader and Validate, and
// it reaches santad's socket.
func TestMemcachedAgent(t *testing.T) {
	r := render(t, map[string]any{"offloadAgents": []any{map[string]any{
		"name":   "cache",
		"kind":   "memcached",
		"config": map[string]any{"cgroup": "kubepods.slice", "port": 11211, "max_rules": 1000},
	}}})
	cfg, err := mcagent.LoadConfig(configFile(t, find[*corev1.ConfigMap](r, "r1-offload-cache"), "offload.json"))
	if err != nil {
		t.Fatalf("the agent's loader refuses its ConfigMap: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the agent refuses its configuration: %v", err)
	}
	if cfg.Cgroup != "kubepods.slice" || cfg.Port != 11211 || cfg.MaxRules != 1000 {
		t.Errorf("agent configuration %+v is not the values'", cfg)
	}
	if santad := r.santadConfig(); cfg.Socket != santad.Socket {
		t.Errorf("the agent's socket %s is not santad's %s", cfg.Socket, santad.Socket)
	}
	c := container(t, find[*appsv1.DaemonSet](r, "r1-offload-cache").Spec.Template.Spec, "santa-offload")
	if !slices.Equal(c.Command, []string{"santa-offload", "memcached", "-config", "/etc/santa/offload.json"}) {
		t.Errorf("command %q", c.Command)
	}
}

// TestBadValues: values the chart cannot run with fail the render with a
// message naming the value and why.
func TestBadValues(t *testing.T) {
	agentWith := func(a map[string]any) map[string]any { return map[string]any{"offloadAgents": []any{a}} }
	config := func(key, value string) map[string]any {
		return map[string]any{"santad": map[string]any{"config": map[string]any{key: value}}}
	}
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"socket outside runDir", config("socket", "/tmp/santa.sock"), `santad.config.socket "/tmp/santa.sock" is not under hostPaths.runDir "/run/santa"`},
		{"socket in a sibling of runDir", config("socket", "/run/santa2/santa.sock"), `is not under hostPaths.runDir`},
		{"state outside runDir", config("state_dir", "/var/lib/santa"), `santad.config.state_dir "/var/lib/santa" is not under hostPaths.runDir`},
		{"pins outside bpffs", config("pin_path", "/run/santa/pins"), `santad.config.pin_path "/run/santa/pins" is not a directory below hostPaths.bpffs`},
		{"pins at bpffs itself", config("pin_path", "/sys/fs/bpf"), `is not a directory below hostPaths.bpffs`},
		{"cgroup elsewhere", config("cgroup_path", "/mnt/cgroup"), `santad.config.cgroup_path "/mnt/cgroup" is not under /sys/fs/cgroup`},
		{"no socket", map[string]any{"santad": map[string]any{"config": map[string]any{"socket": nil}}}, "santad.config.socket must be set"},
		{"agent without a name", agentWith(map[string]any{"kind": "dns"}), "every offloadAgents entry needs a name"},
		{"agent name not a label", agentWith(map[string]any{"name": "Knot_1", "kind": "dns"}), `offloadAgents name "Knot_1" is not a DNS label`},
		{"agent of no kind", agentWith(map[string]any{"name": "x", "kind": "http"}), `offloadAgents "x": kind "http" is not a santa-offload command`},
		{"agent by pid", agentWith(map[string]any{"name": "x", "kind": "dns", "config": map[string]any{"pid": 42}}), `offloadAgents "x": name the server by cgroup or port, not pid`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(ChartDir, PlainRelease, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestPlainManifests: santa.yaml is the chart rendered with its default
// values, so that the two cannot drift; and it decodes strictly.
func TestPlainManifests(t *testing.T) {
	want, err := Plain(ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("santa.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("santa.yaml is not the chart's rendering: run `go run ./cmd/render > santa.yaml` in deploy/kubernetes")
	}
	objs, err := Decode(string(got))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 4 {
		t.Errorf("%d objects, want Namespace, ServiceAccount, ConfigMap, DaemonSet", len(objs))
	}
}

// TestExamples: every example decodes strictly; the DNS sidecar reaches
// the socket of the chart's default santad, read-only, and sees only its
// own pod's processes.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(string(b)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}

	b, err := os.ReadFile("examples/dns-sidecar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(string(b))
	if err != nil {
		t.Fatal(err)
	}
	spec := objs[0].(*appsv1.Deployment).Spec.Template.Spec
	if !spec.HostNetwork || spec.ShareProcessNamespace == nil || !*spec.ShareProcessNamespace || spec.HostPID {
		t.Errorf("hostNetwork %v, shareProcessNamespace %v, hostPID %v: the sidecar must work in the node's network namespace on its pod's processes",
			spec.HostNetwork, spec.ShareProcessNamespace, spec.HostPID)
	}
	c := container(t, spec, "santa-offload")
	checkCapabilities(t, c, []corev1.Capability{"SYS_PTRACE", "DAC_READ_SEARCH"})
	socket := c.Command[slices.Index(c.Command, "-socket")+1]
	if want := daemon.DefaultConfig().Socket; socket != want {
		t.Errorf("the sidecar's socket %s is not the chart's %s", socket, want)
	}
	if m := hostMount(t, spec, c, filepath.Dir(socket)); !m.ReadOnly {
		t.Error("the sidecar may write in santad's directory")
	}
}
