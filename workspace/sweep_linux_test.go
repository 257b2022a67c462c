package workspace

import (
	"testing"

	"github.com/kernelbox/kernelbox/internal/paths"
)

// TestSweepWithoutOpenat2 is TestSweepRemovesOnlyItsOwn where openat2 is
// missing (a kernel before 5.6, a seccomp profile that filters it): directories
// are opened one component at a time.
func TestSweepWithoutOpenat2(t *testing.T) {
	t.Cleanup(paths.UseWalk())
	sweepOnlyItsOwn(t)
}
