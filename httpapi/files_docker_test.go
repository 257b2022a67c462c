package httpapi_test

import (
	"testing"

	"github.com/kernelbox/kernelbox/internal/testkit/filestest"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// TestDockerFiles: the files API on docker sessions (the host session
// directory, bind-mounted at /workspace, written by the server while the
// kernel runs as another uid) gives local's results and codes: the round
// trip, every bad path and everything the kernel planted refused with nothing
// outside read or written, and the batch (the filestest kit).
func TestDockerFiles(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	fs, _ := filesServerOn(t, 0, testexec.DockerBackend)
	t.Run("RoundTrip", func(t *testing.T) { filestest.RoundTrip(t, fs, "dr") })
	t.Run("BadPaths", func(t *testing.T) { filestest.BadPaths(t, fs, "dbad") })
	t.Run("Batch", func(t *testing.T) { filestest.Batch(t, fs, "dbt") })
}
