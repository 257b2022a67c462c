package jupyterapi_test

import (
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/testkit/leakcheck"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// TestMain fails the package when a goroutine outlives its tests: a client's
// reader and writer, a call or request a client started.
func TestMain(m *testing.M) { leakcheck.Main(m, 10*time.Second, testexec.CloseShared) }
