package remote

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/internal/testenv"
	"github.com/kernelbox/kernelbox/jupyter"
)

// rig is one placement with a live kernel on a loopback TCP Jupyter Server, for
// measuring and testing file sync below the executor.
type rig struct {
	b    *Backend
	p    *Placement
	conn *jupyter.Conn
	host string // the host session directory
}

func newRig(t testing.TB, mod func(*Options)) *rig {
	t.Helper()
	py := testenv.Jupyter(t)
	s, err := jupyterproc.Start(context.Background(), jupyterproc.Options{Python: py, RootDir: t.TempDir(), TCPAddr: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	ctx := context.Background()
	o := Options{Gateways: []Gateway{{URL: s.Endpoint().URL, Token: s.Endpoint().Token}}}
	if mod != nil {
		mod(&o)
	}
	b, err := New(ctx, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	host := filepath.Join(t.TempDir(), "sess")
	for _, d := range []string{"inputs", "outputs"} {
		require.NoError(t, os.MkdirAll(filepath.Join(host, d), 0o755))
	}
	pl, err := b.Open(ctx, executor.SessionSpec{ID: "sess", Dir: host})
	require.NoError(t, err)
	p := pl.(*Placement)
	srv := p.Server()
	c, err := jupyter.NewClient(srv.Endpoint, nil)
	require.NoError(t, err)
	k, err := c.StartKernel(ctx, jupyter.StartOptions{Name: srv.KernelName})
	require.NoError(t, err)
	conn, err := c.Connect(ctx, k.ID, &jupyter.ConnOptions{MaxMessageBytes: 33 << 20})
	require.NoError(t, err)
	_, err = conn.KernelInfo(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		conn.Close()
		_ = c.Shutdown(context.Background(), k.ID)
		c.CloseIdle()
		_ = p.Close(context.Background())
	})
	require.NoError(t, p.PushInputs(ctx, conn, host, nil))
	return &rig{b: b, p: p, conn: conn, host: host}
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

func mbps(n int, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestTransferThroughput measures moving a 50 MB file each way, through the kernel
// and (for inputs) through the Contents API, interleaved, and checks the
// checksums. It logs MB/s; the figures decide Options.Transfer's default.
func TestTransferThroughput(t *testing.T) {
	// The full measurement (50 MB, five rounds) takes a minute under the race
	// detector; by default a smaller one checks the same paths.
	size, rounds := 8<<20, 1
	if os.Getenv("KERNELBOX_BENCH") == "1" {
		size, rounds = 50<<20, 5
	}
	r := newRig(t, nil)
	data := make([]byte, size)
	_, _ = rand.Read(data)
	require.NoError(t, os.WriteFile(filepath.Join(r.host, "inputs", "big.bin"), data, 0o644))
	want := sha256hex(data)
	ctx := context.Background()

	var viaKernel, viaContents, pull []time.Duration
	for i := range rounds {
		for _, mode := range []Transfer{TransferKernel, TransferContents} {
			r.b.opts.Transfer = mode
			delete(r.p.sync.pushed, "inputs/big.bin")
			start := time.Now()
			require.NoError(t, r.p.PushInputs(ctx, r.conn, r.host, []string{"big.bin"}))
			d := time.Since(start)
			require.Equal(t, want+"\n", r.run(t, "import hashlib\nprint(hashlib.sha256(open('inputs/big.bin','rb').read()).hexdigest())"))
			if mode == TransferKernel {
				viaKernel = append(viaKernel, d)
			} else {
				require.Equal(t, contentsUsable, r.p.sync.contents)
				viaContents = append(viaContents, d)
			}
		}
		name := fmt.Sprintf("out%d.bin", i)
		sum := r.run(t, fmt.Sprintf("import os, hashlib\nd = os.urandom(%d)\nopen('outputs/%s','wb').write(d)\nprint(hashlib.sha256(d).hexdigest())", size, name))
		start := time.Now()
		require.NoError(t, r.p.PullOutputs(ctx, r.conn, r.host, nil))
		pull = append(pull, time.Since(start))
		b, err := os.ReadFile(filepath.Join(r.host, "outputs", name))
		require.NoError(t, err)
		require.Equal(t, sum, sha256hex(b)+"\n")
	}
	t.Logf("%d MB (chunk %d KiB, window %d), median of %d: push through the kernel %v (%.1f MB/s), through the Contents API %v (%.1f MB/s); pull through the kernel %v (%.1f MB/s)",
		size>>20, r.b.opts.ChunkBytes>>10, r.b.opts.Window, rounds,
		median(viaKernel), mbps(size, median(viaKernel)),
		median(viaContents), mbps(size, median(viaContents)),
		median(pull), mbps(size, median(pull)))
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
