package remote_test

import (
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/testkit/leakcheck"
)

// TestMain fails the run when goroutines outlive the tests: the health checks, the
// connection closers and every client the backend makes must stop by Close.
func TestMain(m *testing.M) { leakcheck.Main(m, 10*time.Second) }
