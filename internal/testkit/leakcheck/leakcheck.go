// Package leakcheck fails a test binary whose goroutines outlive its tests: every
// goroutine a package starts must have an owner that stops it. Use it from TestMain:
//
//	func TestMain(m *testing.M) { leakcheck.Main(m, 5*time.Second) }
//
// A package that keeps something for the life of its test binary (testexec's shared
// Jupyter Servers) passes its closer as an after function, so that its goroutines are
// stopped before they are counted.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// ignored are stack fragments of goroutines the runtime, the testing package and the
// standard library keep for the life of the process.
var ignored = []string{
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.ensureSigM",
	"runtime.goexit0",
	"runtime.runfinq",
	"runtime.bgsweep",
	"runtime.bgscavenge",
	"runtime.forcegchelper",
	"testing.(*M).",
	"testing.runFuzzTests",
	"testing.runFuzzing",
}

// Main runs the tests, then each after function (an error fails the binary), and,
// when the tests passed, fails
// the binary if goroutines other than the ignored ones are still running after wait
// (goroutines on their way out, such as an HTTP connection reading the server's
// close, get that long to finish). It calls os.Exit.
func Main(m *testing.M, wait time.Duration, after ...func() error) {
	code := m.Run()
	for _, f := range after {
		if err := f(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: after the tests: %v\n", err)
			code = 1
		}
	}
	if code == 0 {
		if leaked := Leaked(wait); leaked != "" {
			fmt.Fprintf(os.Stderr, "FAIL: leaked goroutines:\n\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// Leaked returns the stacks of the goroutines other than the caller and the ignored
// ones that are still running after wait, or "".
func Leaked(wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		leaked := others()
		if len(leaked) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func others() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, s := range strings.Split(string(buf), "\n\n")[1:] { // the first is the caller
		if s = strings.TrimSpace(s); s != "" && !isIgnored(s) {
			out = append(out, s)
		}
	}
	return out
}

func isIgnored(stack string) bool {
	for _, frag := range ignored {
		if strings.Contains(stack, frag) {
			return true
		}
	}
	return false
}
