package daemon

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/santadtest"
)

// The SDKs against the real santad, as nobody in its namespace: each SDK's
// live program (sdk/c/tests/live.c, sdk/python/tests/live.py) drives every
// operation of the protocol and checks the kernel's answers byte for
// byte; each SDK's hello example (the paper's Listing 1) serves UDP while
// the kernel answers "Hello" for it. The Go client has no live program
// (this package's tests are one); its hello, examples/go/hello, is a module
// of its own, built as an application outside this repository builds it.
// Needs make, gcc and /usr/bin/python3.

// sdk is how to run one SDK's programs, from copies in the shared
// directory (nobody may not read the source tree).
type sdk struct {
	name  string
	build func() error
	live  func(socket string) []string                 // argv of the live program, if any
	hello func(socket, host string, port int) []string // argv of hello
}

var sdks = []sdk{
	{
		name: "c",
		build: func() error {
			if err := run("make", "-s", "-C", "../../sdk/c", "build/hello", "build/tests/live"); err != nil {
				return err
			}
			for _, bin := range []string{"hello", "tests/live"} {
				if err := run("install", "-m", "0755", filepath.Join("../../sdk/c/build", bin), filepath.Join(shared, "c-"+filepath.Base(bin))); err != nil {
					return err
				}
			}
			return nil
		},
		live: func(socket string) []string { return []string{filepath.Join(shared, "c-live"), socket} },
		hello: func(socket, host string, port int) []string {
			return []string{filepath.Join(shared, "c-hello"), "-s", socket, host, fmt.Sprint(port)}
		},
	},
	{
		name: "python",
		build: func() error {
			dst := filepath.Join(shared, "python")
			if err := run("cp", "-r", "../../sdk/python", dst); err != nil {
				return err
			}
			return run("chmod", "-R", "a+rX", dst)
		},
		live: func(socket string) []string {
			return []string{systemPython, filepath.Join(shared, "python/tests/live.py"), socket}
		},
		hello: func(socket, host string, port int) []string {
			return []string{systemPython, filepath.Join(shared, "python/examples/hello.py"), "--socket", socket, fmt.Sprintf("%s:%d", host, port)}
		},
	},
	{
		name: "go",
		build: func() error {
			// Its go.mod replaces the Santa module with this checkout;
			// readonly: go.mod and go.sum must be complete as committed.
			cmd := exec.Command(santadtest.GoBin(), "build", "-o", filepath.Join(shared, "go-hello"), ".")
			cmd.Dir = "../../examples/go/hello"
			cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("go build in %s: %w\n%s", cmd.Dir, err, out)
			}
			return nil
		},
		hello: func(socket, host string, port int) []string {
			return []string{filepath.Join(shared, "go-hello"), "-socket", socket, fmt.Sprintf("%s:%d", host, port)}
		},
	},
}

// systemPython is Debian's python3 (make setup installs it): one that
// nobody may run, unlike a version manager's under /root.
const systemPython = "/usr/bin/python3"

var built sync.Map // sdk name → its build, run once: func() error

// ready builds s once per test binary.
func (s sdk) ready(t *testing.T) {
	t.Helper()
	v, _ := built.LoadOrStore(s.name, sync.OnceValue(s.build))
	if err := v.(func() error)(); err != nil {
		t.Fatalf("building the %s SDK's programs: %v", s.name, err)
	}
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func TestSDKLive(t *testing.T) {
	e := newEnv(t, "l", "", "-socket-mode", "0666")
	for _, s := range sdks {
		if s.live == nil {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			s.ready(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			argv := s.live(e.d.Socket)
			out, err := e.asNobody(ctx, argv[0], argv[1:]...).CombinedOutput()
			t.Logf("%s live:\n%s", s.name, out)
			if err != nil {
				t.Fatalf("%s live: %v", s.name, err)
			}
			if !bytes.Contains(out, []byte("live: ok")) {
				t.Fatalf("%s live did not say \"live: ok\"", s.name)
			}
		})
	}
}

// Listing 1 in each SDK: the kernel answers "Hello" with "COMSYS", hello
// answers the rest with "APP:" + the request, and its rule's counter says
// how many the kernel answered.
func TestSDKHello(t *testing.T) {
	e := newEnv(t, "h", "", "-socket-mode", "0666")
	for _, s := range sdks {
		t.Run(s.name, func(t *testing.T) {
			s.ready(t)
			port := freePort(t, e)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			argv := s.hello(e.d.Socket, "127.0.0.1", port)
			cmd := e.asNobody(ctx, argv[0], argv[1:]...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cmd.Process.Kill()
				cmd.Wait()
			}()
			q := e.dialUDP(t, uint16(port))

			// hello installs its rule before it serves: once it answers,
			// the kernel answers "Hello".
			app := 0
			for deadline := time.Now().Add(20 * time.Second); app == 0; {
				if time.Now().After(deadline) {
					t.Fatalf("hello did not answer within 20 s; it said:\n%s", stderr.String())
				}
				if got, err := santadtest.Ask(q, []byte("ready?"), 200*time.Millisecond); err == nil {
					if string(got) != "APP:ready?" {
						t.Fatalf("hello answered %q to \"ready?\"", got)
					}
					app++
				}
			}
			for range 5 {
				expect(t, q, "Hello", "COMSYS")
				expect(t, q, "Hi there", "APP:Hi there")
				app++
			}

			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("hello: %v\n%s", err, stderr.String())
			}
			want := fmt.Sprintf("STATS kernel=5 app=%d", app)
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("hello printed %q, want %q", stdout.String(), want)
			}
		})
	}
}

// expect sends req and wants exactly reply back within a second.
func expect(t *testing.T, q *net.UDPConn, req, reply string) {
	t.Helper()
	got, err := santadtest.Ask(q, []byte(req), time.Second)
	if err != nil || string(got) != reply {
		t.Fatalf("%q got %q (%v), want %q", req, got, err, reply)
	}
}

// freePort is a UDP port free on 127.0.0.1 in the namespace.
func freePort(t *testing.T, e *env) int {
	t.Helper()
	u := e.listenUDP(t)
	port := portOf(u)
	u.Close()
	return int(port)
}
