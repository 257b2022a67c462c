package kernelfs

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/jupyter"
)

// rig is a Syncer with a live kernel on a loopback TCP Jupyter Server, for testing
// and measuring file sync without the remote backend.
type rig struct {
	s     *Syncer
	conn  *jupyter.Conn
	files *jupyter.Client // the server's Contents API
	host  string          // the host session directory
}

// newRig starts a server and a kernel, and sets the session up with one push.
func newRig(t testing.TB, mod func(*Options)) *rig {
	t.Helper()
	py := testenv.Jupyter(t)
	ctx := context.Background()
	srv, err := jupyterproc.Start(ctx, jupyterproc.Options{Python: py, RootDir: t.TempDir(), TCPAddr: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	c, err := jupyter.NewClient(srv.Endpoint(), nil)
	require.NoError(t, err)
	t.Cleanup(c.CloseIdle)
	k, err := c.StartKernel(ctx, jupyter.StartOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Shutdown(context.Background(), k.ID) })
	conn, err := c.Connect(ctx, k.ID, &jupyter.ConnOptions{MaxMessageBytes: 33 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = conn.KernelInfo(ctx)
	require.NoError(t, err)

	host := filepath.Join(t.TempDir(), "sess")
	for _, d := range []string{"inputs", "outputs"} {
		require.NoError(t, os.MkdirAll(filepath.Join(host, d), 0o755))
	}
	var o Options
	if mod != nil {
		mod(&o)
	}
	r := &rig{s: New(o), conn: conn, files: c, host: host}
	require.NoError(t, r.s.PushInputs(ctx, conn, host, nil))
	return r
}

// run executes code in the rig's kernel and returns its stdout.
func (r *rig) run(t testing.TB, code string) string {
	t.Helper()
	var out string
	reply, err := r.conn.Run(context.Background(), code, func(m *jupyter.Message) {
		var s jupyter.StreamContent
		if m.Type() == "stream" && m.DecodeContent(&s) == nil {
			out += s.Text
		}
	})
	require.NoError(t, err)
	require.Equal(t, "ok", reply.Status, "%s: %s", reply.Ename, reply.Evalue)
	return out
}
