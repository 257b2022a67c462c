package mcpserver_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain fails the run when goroutines outlive the tests: every goroutine a tool
// call starts (progress senders included) must end with the call, and every
// connection's with its Close.
func TestMain(m *testing.M) {
	base := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		if leaked := waitGoroutines(base, 5*time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "FAIL: goroutines leaked:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// waitGoroutines waits until no more than base goroutines remain and returns every
// goroutine's stack if they do not get there in time.
func waitGoroutines(base int, timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			return string(buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ""
}
