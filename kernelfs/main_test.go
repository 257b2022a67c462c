package kernelfs

import (
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/testkit/leakcheck"
)

// TestMain fails the run when goroutines outlive the tests: transfer windows must
// stop with their transfers.
func TestMain(m *testing.M) { leakcheck.Main(m, 10*time.Second) }
