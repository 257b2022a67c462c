package mcpserver_test

import (
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/testkit/leakcheck"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// TestMain fails the run when goroutines outlive the tests: every goroutine a tool
// call starts (progress senders included) must end with the call, and every
// connection's with its Close.
func TestMain(m *testing.M) { leakcheck.Main(m, 5*time.Second, testexec.CloseShared) }
