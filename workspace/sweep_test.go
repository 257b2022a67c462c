package workspace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
)

// putHelperEnv makes the test binary run helperPut instead of the tests.
const putHelperEnv = "KERNELBOX_TEST_PUT_ROOT"

func init() {
	if root := os.Getenv(putHelperEnv); root != "" {
		helperPut(root)
	}
}

// helperPut is a kernelbox that uploads its stdin to outputs/up/big.bin of
// session s1 until it is killed.
func helperPut(root string) {
	m, err := New(Options{Root: root, DiskQuota: 64 << 20})
	if err != nil {
		os.Exit(2)
	}
	s, err := m.Open("s1")
	if err != nil {
		os.Exit(3)
	}
	_, _ = s.Put(context.Background(), "outputs/up/big.bin", os.Stdin, api.PutOptions{})
	os.Exit(4) // not reached: the test kills it first
}

// TestSweepAfterKilledUpload: a kernelbox killed (SIGKILL) in the middle of an
// upload leaves its temporary file in the session (issue 33, 7c: 50 MiB of it,
// visible to the kernel and counted against the quota); the next open of the
// session removes it, and nothing else.
func TestSweepAfterKilledUpload(t *testing.T) {
	root := filepath.Join(t.TempDir(), "kb")
	m0 := newManager(t, func(o *Options) { o.Root = root; o.DiskQuota = 64 << 20 })
	s0 := openSession(t, m0, "s1")
	writeFile(t, filepath.Join(s0.Dir(), "outputs", "up", "kept.txt"), "kernel's")
	require.NoError(t, s0.Close())
	require.NoError(t, m0.Close())

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), putHelperEnv+"="+root)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(i)
	}
	for range 20 {
		_, err := in.Write(block)
		require.NoError(t, err)
	}
	dir := filepath.Join(root, "sessions", "s1", "outputs", "up")
	var tmp string
	require.Eventually(t, func() bool {
		for _, p := range tempLeft(t, dir) {
			if fi, err := os.Stat(p); err == nil && fi.Size() >= 20<<20 {
				tmp = p
				return true
			}
		}
		return false
	}, 30*time.Second, 10*time.Millisecond, "the upload's temporary file")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	assert.FileExists(t, tmp, "SIGKILL leaves the temporary file")

	m := newManager(t, func(o *Options) { o.Root = root; o.DiskQuota = 64 << 20 })
	s := openSession(t, m, "s1")
	assert.Empty(t, tempLeft(t, s.Dir()))
	assert.Equal(t, []string{"kept.txt"}, dirNames(t, filepath.Join(s.Dir(), "outputs", "up")))
	assert.Equal(t, "kernel's", readFile(t, filepath.Join(s.Dir(), "outputs", "up", "kept.txt")))
}

// TestSweepRemovesOnlyItsOwn: the sweep removes kernelbox's temporary regular
// files at any depth and data/ copies cut short; it leaves a link, a FIFO and a
// directory of that name elsewhere, never follows a link to a host directory,
// and leaves the kernel's files alone.
func TestSweepRemovesOnlyItsOwn(t *testing.T) { sweepOnlyItsOwn(t) }

func sweepOnlyItsOwn(t *testing.T) {
	m := newManager(t, nil)
	s := openSession(t, m, "s1")
	host := filepath.Join(t.TempDir(), "host")
	hostTmp := filepath.Join(host, tempPrefix+"0000000000000000")
	writeFile(t, hostTmp, "host")
	deep := filepath.Join(s.Dir(), "outputs", strings.Repeat("d/", 60))
	own := []string{
		filepath.Join(s.Dir(), tempPrefix+"0123456789abcdef"),
		filepath.Join(s.Dir(), "outputs", "a", tempPrefix+"1123456789abcdef"),
		filepath.Join(deep, tempPrefix+"2123456789abcdef"),
		filepath.Join(s.Dir(), "inputs", tempPrefix+"3123456789abcdef"),
	}
	for _, p := range own {
		writeFile(t, p, "partial")
	}
	partial := filepath.Join(s.Dir(), "data", tempPrefix+"4123456789abcdef")
	writeFile(t, filepath.Join(partial, "sub", "f"), "copy")
	require.NoError(t, os.Chmod(filepath.Join(partial, "sub"), 0o555))
	kernels := []string{
		filepath.Join(s.Dir(), "outputs", "a", "result.csv"),
		filepath.Join(deep, "x.kb-tmp-1"),
	}
	for _, p := range kernels {
		writeFile(t, p, "kernel")
	}
	link := filepath.Join(s.Dir(), "outputs", tempPrefix+"5123456789abcdef")
	require.NoError(t, os.Symlink(hostTmp, link))
	require.NoError(t, os.Symlink(host, filepath.Join(s.Dir(), "outputs", "hostdir")))
	fifo := filepath.Join(s.Dir(), "outputs", tempPrefix+"6123456789abcdef")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	dirOfName := filepath.Join(s.Dir(), "outputs", tempPrefix+"7123456789abcdef")
	writeFile(t, filepath.Join(dirOfName, "inside"), "kernel")
	require.NoError(t, s.Close())

	s2 := openSession(t, m, "s1")
	for _, p := range own {
		assert.NoFileExists(t, p)
	}
	assert.NoDirExists(t, partial)
	for _, p := range kernels {
		assert.FileExists(t, p)
	}
	assert.Equal(t, "host", readFile(t, hostTmp))
	for _, p := range []string{link, fifo, dirOfName} {
		_, err := os.Lstat(p)
		assert.NoError(t, err, "%s stays", filepath.Base(p))
	}
	assert.FileExists(t, filepath.Join(dirOfName, "inside"))
	_ = s2
}
