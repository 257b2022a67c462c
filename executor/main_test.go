package executor_test

import (
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/leakcheck"
)

// TestMain fails the package if goroutines outlive its tests.
func TestMain(m *testing.M) { leakcheck.Main(m, 5*time.Second) }
