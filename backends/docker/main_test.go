package docker

import (
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/testkit/leakcheck"
)

// TestMain fails the run when goroutines outlive the tests: every goroutine the
// backend or its clients start must end by the time Close returns.
func TestMain(m *testing.M) { leakcheck.Main(m, 5*time.Second) }
