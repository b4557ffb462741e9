package deploy_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// layout is where a make install puts things for one PREFIX.
type layout struct {
	prefix string
	// mount is the prefix or an ancestor of it that every host has: the
	// DESTDIR's copy is mounted there to use the tree at its paths.
	mount string
	// zshDir is where _santactl goes; inFpath says Debian's zsh reads it
	// without help.
	zshDir  string
	inFpath bool
}

var layouts = []layout{
	{prefix: "/opt/santa", mount: "/opt", zshDir: "/opt/santa/share/zsh/site-functions"},
	{prefix: "/usr/local", mount: "/usr/local", zshDir: "/usr/local/share/zsh/site-functions", inFpath: true},
}

// makeInstallTarget runs the top-level Makefile's target (install or
// uninstall) with DESTDIR=dest and PREFIX=prefix.
func makeInstallTarget(t *testing.T, target, dest, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, "make", "-C", "..", target, "DESTDIR="+dest, "PREFIX="+prefix).CombinedOutput()
	if err != nil {
		t.Fatalf("make %s DESTDIR=%s PREFIX=%s: %v\n%s", target, dest, prefix, err, out)
	}
	t.Logf("make %s: %v", target, time.Since(start).Round(time.Second))
}

// filesUnder lists the files and symlinks under dir, relative to it.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files = append(files, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// wantInstalled is every file make install puts under DESTDIR for l,
// from the sources that decide it.
func (l layout) wantInstalled(t *testing.T) []string {
	t.Helper()
	p := l.prefix[1:]
	want := []string{
		p + "/sbin/santad", p + "/sbin/santa-offload", p + "/bin/santactl",
		"etc/santa/santad.json", "etc/sysusers.d/santa.conf", p + "/lib/tmpfiles.d/santa.conf",
		l.zshDir[1:] + "/_santactl",
		p + "/include/santa/santa.h", p + "/lib/pkgconfig/santa.pc",
		p + "/lib/libsanta.a", p + "/lib/libsanta.so", p + "/lib/libsanta.so.0", p + "/lib/libsanta.so.0.1.0",
	}
	for _, unit := range units(t) {
		want = append(want, p+"/lib/systemd/system/"+unit)
	}
	configs, _ := filepath.Glob("*.json")
	for _, c := range configs {
		want = append(want, p+"/share/doc/santa/examples/"+c)
	}
	pages, _ := filepath.Glob("../docs/man/*.md")
	for _, page := range pages {
		name := strings.TrimSuffix(filepath.Base(page), ".md")
		want = append(want, p+"/share/man/man"+name[len(name)-1:]+"/"+name)
	}
	for _, c := range []string{"santad", "santactl", "santa-offload"} {
		want = append(want, p+"/share/bash-completion/completions/"+c)
	}
	slices.Sort(want)
	return want
}

// at is a command prefix that runs its arguments in a mount namespace of
// their own where the tree installed into dest is at its paths, the ones
// its files name (units, _santactl, santa.pc's rpath).
func (l layout) at(dest string) []string {
	return []string{"unshare", "-m", "--", "sh", "-c", `mount --bind "$0" "$1" && shift && exec "$@"`, dest + l.mount, l.mount}
}

// TestMakeInstall installs with the top-level make install, DESTDIR and
// each layout's PREFIX, checks the tree, uses it at its prefix (zsh
// completes through the installed _santactl; a C program built from
// pkg-config's flags runs without LD_LIBRARY_PATH), and checks make
// uninstall leaves only the configuration.
func TestMakeInstall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the tree is used at its prefix in a mount namespace")
	}
	for _, tool := range []string{"make", "unshare", "zsh", "cc", "pkg-config"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make setup, make test-deps)", tool)
		}
	}
	for _, l := range layouts {
		t.Run(strings.ReplaceAll(l.prefix[1:], "/", "-"), l.testInstall) // opt-santa
	}
}

func (l layout) testInstall(t *testing.T) {
	if st, err := os.Stat(l.mount); err != nil || !st.IsDir() {
		t.Skipf("no %s to mount the installed tree on", l.mount)
	}
	dest := t.TempDir()
	root := filepath.Join(dest, l.prefix)
	makeInstallTarget(t, "install", dest, l.prefix)

	if got, want := filesUnder(t, dest), l.wantInstalled(t); !slices.Equal(got, want) {
		t.Fatalf("make install installed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, unit := range units(t) {
		text := read(t, filepath.Join(root, "lib/systemd/system", unit))
		if !strings.Contains(text, "\nExecStart="+l.prefix+"/sbin/") || strings.Contains(text, "/usr/sbin/") {
			t.Errorf("installed %s does not run its command from %s/sbin:\n%s", unit, l.prefix, text)
		}
	}
	for _, cmd := range []string{"sbin/santad", "sbin/santa-offload", "bin/santactl"} {
		if out, err := exec.Command(filepath.Join(root, cmd), "--version").CombinedOutput(); err != nil {
			t.Errorf("installed %s --version: %v\n%s", cmd, err, out)
		}
	}
	for _, page := range []string{"man8/santad.8", "man8/santactl.8", "man8/santa-offload.8", "man5/santad.json.5"} {
		ext := filepath.Ext(page)
		th := ".TH " + strings.ToUpper(strings.TrimSuffix(filepath.Base(page), ext)) + " " + ext[1:] + " "
		if text := read(t, filepath.Join(root, "share/man", page)); !strings.Contains(text, "\n"+th) {
			t.Errorf("installed %s has no %q line:\n%.200s", page, th, text)
		}
	}

	// An operator's configuration survives another make install.
	config := filepath.Join(dest, "etc/santa/santad.json")
	if err := os.WriteFile(config, []byte("{\"interfaces\": [\"lo\"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	makeInstallTarget(t, "install", dest, l.prefix)
	if got := read(t, config); got != "{\"interfaces\": [\"lo\"]}\n" {
		t.Errorf("make install overwrote the configuration: %q", got)
	}

	t.Run("zsh", func(t *testing.T) {
		compdir := l.zshDir // what a user adds to fpath
		if l.inFpath {
			compdir = ""
		}
		path := "PATH=" + l.prefix + "/bin:" + l.prefix + "/sbin:" + os.Getenv("PATH")
		bins := filepath.Join(root, "bin") + ":" + filepath.Join(root, "sbin") // both, as PATH
		for _, line := range []string{"santactl ", "santactl stats -", "santad -", "santa-offload ", "santa-offload memcached -"} {
			got := completeZshInstalled(t, l.at(dest), compdir, line, path)
			want := complete(t, bins, line)
			slices.Sort(got)
			slices.Sort(want)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Errorf("completing %q: the installed _santactl offers %q, bash %q", line, got, want)
			}
		}
	})

	t.Run("pkg-config", func(t *testing.T) {
		tmp := t.TempDir()
		script := `set -e
flags=$(PKG_CONFIG_PATH=` + l.prefix + `/lib/pkgconfig pkg-config --cflags --libs santa)
echo flags: $flags
cc -o "$T/consumer" ../sdk/c/tests/consumer.c $flags
env -u LD_LIBRARY_PATH "$T/consumer"
env -u LD_LIBRARY_PATH ldd "$T/consumer"`
		args := append(l.at(dest), "sh", "-c", script)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "T="+tmp)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("building and running a libsanta program from the installed tree: %v\n%s", err, out)
		}
		lib := l.prefix + "/lib"
		for _, want := range []string{
			"flags: -I" + l.prefix + "/include -L" + lib + " -Wl,-rpath," + lib + " -lsanta\n",
			"consumer: ok",
			"libsanta.so.0 => " + lib + "/libsanta.so.0 ",
		} {
			if !strings.Contains(string(out), want) {
				t.Errorf("no %q in:\n%s", want, out)
			}
		}
	})

	makeInstallTarget(t, "uninstall", dest, l.prefix)
	if got := filesUnder(t, dest); !slices.Equal(got, []string{"etc/santa/santad.json"}) {
		t.Errorf("make uninstall left %q, want only etc/santa/santad.json (the configuration)", got)
	}
}
