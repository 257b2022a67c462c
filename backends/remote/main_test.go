package remote_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run when goroutines outlive the tests: the health checks, the
// connection closers and every client the backend makes must stop by Close.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(10 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "FAIL: leaked goroutines:\n\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// ignoredGoroutines are stack fragments of goroutines the runtime, the testing
// package or the standard library's process helpers keep.
var ignoredGoroutines = []string{
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

// leakedGoroutines returns the stacks of goroutines other than the caller and the
// ignored ones, retrying until wait has passed so that goroutines already on their
// way out (an idle HTTP connection reading the server's close) can finish.
func leakedGoroutines(wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		leaked := otherGoroutines()
		if len(leaked) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func otherGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var leaked []string
	for _, s := range strings.Split(string(buf), "\n\n")[1:] { // the first is this goroutine
		if s = strings.TrimSpace(s); s != "" && !ignored(s) {
			leaked = append(leaked, s)
		}
	}
	return leaked
}

func ignored(stack string) bool {
	for _, frag := range ignoredGoroutines {
		if strings.Contains(stack, frag) {
			return true
		}
	}
	return false
}
