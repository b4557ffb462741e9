package deploy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santa-offload/santa/client"
)

// buildCommands builds santad, santactl and santa-offload into a
// temporary directory, which it returns.
func buildCommands(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", dir+"/", "../cmd/santad", "../cmd/santactl", "../cmd/santa-offload").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// completeZsh runs the same script as zsh runs it (_santa: through
// bashcompinit, whose _bash_complete emulates sh) and returns the
// candidates before zsh's own matching.
func completeZsh(t *testing.T, bin, line string) []string {
	t.Helper()
	script := `autoload -U +X compinit && compinit -u
autoload -U +X bashcompinit && bashcompinit
source completion/santa.bash
run() {
	emulate -L sh
	setopt kshglob noshglob braceexpand
	COMP_WORDS=(${=LINE})
	[[ $LINE == *" " ]] && COMP_WORDS+=("")
	COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
	_santa
	printf '%s\n' "${COMPREPLY[@]}"
}
run`
	cmd := exec.Command("zsh", "-fc", script)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "LINE="+line)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("completing %q in zsh: %v\n%s", line, err, out)
	}
	return strings.Fields(string(out))
}

// completeZshInstalled types line and a tab into an interactive zsh
// (through a pty) whose completion system finds _santactl in compdir, as
// a user's shell does, and returns what it offered. zsh runs under wrap
// (a command that runs its arguments, nil for none); env adds to the
// environment: PATH with the commands, for one.
func completeZshInstalled(t *testing.T, wrap []string, compdir, line string, env ...string) []string {
	t.Helper()
	// compadd, wrapped, also writes each match to $OUT. ^T completes,
	// then runs a command whose output says the completion is over: keys
	// typed while zsh is still busy could be dropped as typeahead.
	script := `zmodload zsh/zpty || exit 1
zpty z zsh -f -i
zpty -w z 'fpath=($COMPDIR $fpath); autoload -U compinit; compinit -u -D; unsetopt autolist'
zpty -w z 'compadd() { local -a m; builtin compadd -O m "$@"; print -l -- $m >> $OUT; builtin compadd "$@"; }'
zpty -w z 'complete-then-mark() { zle complete-word; BUFFER="print COMPLETION\"\"DONE"; zle accept-line }; zle -N complete-then-mark; bindkey "^T" complete-then-mark'
zpty -w -n z "$LINE"$'\x14'
zpty -r z _ '*COMPLETIONDONE*'
zpty -d z
[[ ! -e $OUT ]] || cat $OUT`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append(wrap[:len(wrap):len(wrap)], "zsh", "-fc", script)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(append(os.Environ(), env...), "COMPDIR="+compdir, "LINE="+line, "OUT="+filepath.Join(t.TempDir(), "matches"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("completing %q in an interactive zsh: %v\n%s", line, err, out)
	}
	return strings.Fields(string(out))
}

// TestZshCompletion checks that zsh, through bashcompinit, completes
// santactl's commands and a command's flags as bash does.
func TestZshCompletion(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Skip("no zsh: apt-get install zsh")
	}
	bin := buildCommands(t)
	for _, line := range []string{"santactl ", "santactl stats -", "santad -", "santa-offload ", "santa-offload dns -", "santa-offload memcached -"} {
		got, want := completeZsh(t, bin, line), complete(t, bin, line)
		slices.Sort(got)
		slices.Sort(want)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("completing %q: zsh offers %q, bash %q", line, got, want)
		}
	}
}

// complete runs the bash completion on line (the cursor at its end) with
// the commands in bin, and returns the candidates.
func complete(t *testing.T, bin, line string) []string {
	t.Helper()
	script := `source completion/santa.bash
read -ra COMP_WORDS <<< "$LINE"
[[ $LINE == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_santa
printf '%s\n' "${COMPREPLY[@]}"`
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "LINE="+line)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("completing %q: %v", line, err)
	}
	return strings.Fields(string(out))
}

var helpFlag = regexp.MustCompile(`(?m)^  (-[a-z0-9-]+)`)

// flagsOf lists the flags a command's Go flag set prints for -h.
func flagsOf(t *testing.T, bin string, args ...string) []string {
	t.Helper()
	out, _ := exec.Command(filepath.Join(bin, args[0]), args[1:]...).CombinedOutput()
	var flags []string
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		flags = append(flags, m[1])
	}
	if len(flags) == 0 {
		t.Fatalf("%q -h lists no flags:\n%s", args, out)
	}
	return flags
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// wantAll checks that every word is a candidate and named in the page
// the man page is made of ("" for none).
func wantAll(t *testing.T, line string, got, words []string, page, pageText string) {
	t.Helper()
	for _, w := range words {
		if !slices.Contains(got, w) {
			t.Errorf("completing %q does not offer %s (got %q)", line, w, got)
		}
		if page != "" && !names(pageText, w) {
			t.Errorf("%s (the man page's source) never names %s", page, w)
		}
	}
}

// names says whether text names flag: as itself, or, for santa-offload's
// flags that are configuration keys, as the key (-max-rules: max_rules).
func names(text, flag string) bool {
	word := func(w string) bool {
		return regexp.MustCompile(`(^|[^a-z0-9_-])` + regexp.QuoteMeta(w) + `($|[^a-z0-9_-])`).MatchString(text)
	}
	return word(flag) || word("`"+strings.ReplaceAll(flag[1:], "-", "_")+"`")
}

// TestCompletionAndManPages checks, for every command, subcommand and
// flag of the binaries, that the bash completion offers it and the text
// its man page is made of (docs/man/*.md's @include) names it.
func TestCompletionAndManPages(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin := buildCommands(t)

	santactl := read(t, "../docs/santactl.md")
	var commands []string
	for _, m := range regexp.MustCompile(`(?m)^### ([a-z, ]+)$`).FindAllStringSubmatch(santactl, -1) {
		commands = append(commands, strings.Split(m[1], ", ")...) // "### learn, hot"
	}
	if len(commands) < 13 {
		t.Fatalf("docs/santactl.md documents only %q", commands)
	}
	got := complete(t, bin, "santactl ")
	wantAll(t, "santactl ", got, append(commands, "help"), "", "")
	wantAll(t, "santactl ", got, flagsOf(t, bin, "santactl", "-h"), "docs/santactl.md", santactl)
	for _, c := range commands {
		line := "santactl " + c + " -"
		wantAll(t, line, complete(t, bin, line), flagsOf(t, bin, "santactl", "help", c), "docs/santactl.md", santactl)
	}

	wantAll(t, "santad -", complete(t, bin, "santad -"), flagsOf(t, bin, "santad", "-h"),
		"docs/operations.md", read(t, "../docs/operations.md"))
	if got := complete(t, bin, "santad -config "); len(got) != 0 {
		t.Errorf("completing santad -config offers %q, want nothing (files, by bash's default)", got)
	}

	agents := []string{"dns", "memcached"}
	wantAll(t, "santa-offload ", complete(t, bin, "santa-offload "), agents, "", "")
	for _, agent := range agents {
		line, doc := "santa-offload "+agent+" -", "docs/offload-"+agent+".md"
		wantAll(t, line, complete(t, bin, line), flagsOf(t, bin, "santa-offload", agent, "-h"), doc, read(t, "../"+doc))
	}
}

// TestManPageEnvironment checks that santactl's man page describes, in
// its ENVIRONMENT section, the variable santactl reads.
func TestManPageEnvironment(t *testing.T) {
	page := read(t, "../docs/man/santactl.8.md")
	m := regexp.MustCompile(`(?s)\n# ENVIRONMENT[^\n]*\n(.*?)\n# `).FindStringSubmatch(page)
	if m == nil || !strings.Contains(m[1], "**"+client.SocketEnv+"**\n: ") {
		t.Errorf("docs/man/santactl.8.md has no ENVIRONMENT entry for %s", client.SocketEnv)
	}
}
