package workspace

import "testing"

// TestSweepWithoutOpenat2 is TestSweepRemovesOnlyItsOwn where openat2 is
// missing (a kernel before 5.6, a seccomp profile that filters it): directories
// are opened one component at a time.
func TestSweepWithoutOpenat2(t *testing.T) {
	was := noOpenat2.Load()
	noOpenat2.Store(true)
	t.Cleanup(func() { noOpenat2.Store(was) })
	sweepOnlyItsOwn(t)
}
