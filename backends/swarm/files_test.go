package swarm_test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/testkit/filestest"
)

// labFiles is kernelbox in the lab as the files kit sees it: its API on the
// bind-mounted unix socket (no token: a unix listener is guarded by its mode).
func labFiles() *filestest.Server {
	sock := filepath.Join(lab.srv, "api.sock")
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	return &filestest.Server{URL: "http://kernelbox", Client: &http.Client{Transport: tr, Timeout: 5 * time.Minute},
		Reserved: []string{".kernelbox-session"}}
}

// TestFiles runs the session files kit on swarm sessions, whose files live in
// the task's /workspace and move through the kernel (kernelfs): the same
// results and codes as on local, docker and remote.
func TestFiles(t *testing.T) {
	requireLab(t)
	fs := labFiles()
	t.Run("round trip", func(t *testing.T) {
		filestest.RoundTrip(t, fs, "files-rt")
		filestest.ListBounds(t, fs, "files-rt")
	})
	t.Run("bad paths", func(t *testing.T) { filestest.BadPaths(t, fs, "files-bad") })
	t.Run("batch", func(t *testing.T) { filestest.Batch(t, fs, "files-batch") })
	for _, id := range []string{"files-rt", "files-bad", "files-batch"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = lab.kb.CloseSession(ctx, id)
		cancel()
	}
}
