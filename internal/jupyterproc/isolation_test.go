package jupyterproc_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/internal/procs"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Another user of the host reaches neither the server nor its kernels: nothing of
// theirs listens on TCP (the kernels' channels are unix sockets in the private 0700
// runtime directory, which a loopback TCP port would expose to every local user), and
// the token is on no command line (/proc/PID/cmdline is world-readable).
func TestServerPrivate(t *testing.T) {
	py := testenv.Jupyter(t)
	ctx := context.Background()
	s, err := jupyterproc.Start(ctx, jupyterproc.Options{Python: py, RootDir: t.TempDir()})
	require.NoError(t, err)
	defer s.Stop(ctx)
	c, err := jupyter.NewClient(s.Endpoint(), nil)
	require.NoError(t, err)
	k, err := c.StartKernel(ctx, jupyter.StartOptions{})
	require.NoError(t, err)
	conn, err := c.Connect(ctx, k.ID, nil)
	require.NoError(t, err)
	defer conn.Close()
	r, err := conn.Run(ctx, "print(1 + 1)", nil)
	require.NoError(t, err)
	require.Equal(t, "ok", r.Status)

	st, err := os.Stat(s.RuntimeDir())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())

	tree := append([]int{s.Pid()}, procs.Descendants(s.Pid())...)
	var listeners, cmdlines []string
	kernelSockets := 0
	for _, pid := range tree {
		for _, l := range procs.TCPListeners(pid) {
			listeners = append(listeners, strconv.Itoa(pid)+" "+l)
		}
		if strings.Contains(procs.Cmdline(pid), s.Endpoint().Token) {
			cmdlines = append(cmdlines, procs.Cmdline(pid))
		}
		for _, p := range procs.UnixSockets(pid) {
			require.True(t, strings.HasPrefix(p, s.RuntimeDir()+"/"), "socket %s of %d outside the runtime dir", p, pid)
			if pid != s.Pid() {
				kernelSockets++
			}
		}
	}
	require.Len(t, tree, 3, "supervisor, server and one kernel: %v", tree)
	assert.Empty(t, listeners, "TCP listeners (pid, hex address:port)")
	assert.Empty(t, cmdlines, "command lines with the token")
	assert.GreaterOrEqual(t, kernelSockets, 5, "the kernel's five channels are unix sockets")
}

// Output of a forked child still arrives, through the kernel's pipe that is a unix
// socket now.
func TestServerForkedOutput(t *testing.T) {
	py := testenv.Jupyter(t)
	ctx := context.Background()
	s, err := jupyterproc.Start(ctx, jupyterproc.Options{Python: py, RootDir: t.TempDir()})
	require.NoError(t, err)
	defer s.Stop(ctx)
	c, err := jupyter.NewClient(s.Endpoint(), nil)
	require.NoError(t, err)
	k, err := c.StartKernel(ctx, jupyter.StartOptions{})
	require.NoError(t, err)
	conn, err := c.Connect(ctx, k.ID, nil)
	require.NoError(t, err)
	defer conn.Close()
	var out strings.Builder
	r, err := conn.Run(ctx, "import multiprocessing as mp\nctx = mp.get_context('fork')\np = ctx.Process(target=print, args=('from-child',))\np.start(); p.join()\nimport time; time.sleep(0.5)", func(m *jupyter.Message) {
		out.Write(m.Content)
	})
	require.NoError(t, err)
	require.Equal(t, "ok", r.Status)
	require.Contains(t, out.String(), "from-child")
}

// A temp dir too long for the kernels' unix sockets is refused at start, with the
// remedy, instead of every kernel failing to bind.
func TestServerTempDirTooLong(t *testing.T) {
	py := testenv.Jupyter(t)
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 60))
	require.NoError(t, os.Mkdir(long, 0o700))
	t.Setenv("TMPDIR", long)
	_, err := jupyterproc.Start(context.Background(), jupyterproc.Options{Python: py, RootDir: t.TempDir()})
	require.ErrorContains(t, err, "set TMPDIR to a shorter directory")
	entries, err := os.ReadDir(long)
	require.NoError(t, err)
	require.Empty(t, entries, "the runtime dir is removed")
}
