package jupyter_test

import (
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/testkit/leakcheck"
)

// TestMain fails the run when goroutines outlive the tests: every goroutine a Conn,
// a Client or the fake server starts must have an owner that stops it.
func TestMain(m *testing.M) { leakcheck.Main(m, 2*time.Second) }
