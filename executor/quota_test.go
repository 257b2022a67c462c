package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/workspace"
)

// fillCode writes 100 MiB to big (not in outputs/, so no artifact copy adds to the host's share), then asks posix_fallocate for 5 GiB
// (the call), and prints how far each got.
const fillCode = `import os, errno
n = 0
try:
    with open('big', 'wb') as f:
        block = os.urandom(1 << 20)
        for _ in range(100):
            f.write(block)
            n += len(block)
        f.flush()
        os.fsync(f.fileno())
    w = 'ok'
except OSError as e:
    w = errno.errorcode[e.errno]
fd = os.open('huge', os.O_CREAT | os.O_WRONLY)
try:
    os.posix_fallocate(fd, 0, 5 << 30)
    a = 'ok'
except OSError as e:
    a = errno.errorcode[e.errno]
os.close(fd)
print(w, a, n)
`

// quotaWorkspace makes a workspace with a 64 MiB disk quota for executor
// options.
func quotaWorkspace(t *testing.T, checkOnly bool) (*workspace.Manager, func(*executor.Options)) {
	t.Helper()
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(t.TempDir(), "ws"), DiskQuota: 64 << 20, DiskQuotaCheckOnly: checkOnly})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	return ws, func(o *executor.Options) { o.Workspace = ws }
}

func hostFree(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	return int64(st.Bfree) * st.Bsize
}

func TestLocalDiskQuota(t *testing.T) {
	ws, mod := quotaWorkspace(t, false)
	if _, off := ws.DiskQuota(); off != "" {
		require.NotZero(t, os.Geteuid(), "as root sessions get disks of their own: %s", off)
	}
	e := newEnv(t, mod)
	e.run(t, "q", "1")
	free := hostFree(t, ws.Root())
	r := e.run(t, "q", fillCode)
	after := hostFree(t, ws.Root())
	t.Logf("status %s, stdout %q, notes %q; host free space fell by %d bytes", r.Status, r.Stdout, r.Notes, free-after)
	if _, off := ws.DiskQuota(); off == "" {
		// The kernel's own file system refused the excess.
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		f := strings.Fields(r.Stdout)
		require.Len(t, f, 3, r.Stdout)
		assert.Equal(t, "ENOSPC", f[0])
		assert.Equal(t, "ENOSPC", f[1])
		// Other processes share the host file system: some slack.
		assert.Less(t, free-after, int64(64<<20+16<<20))
	} else {
		require.Equal(t, api.StatusError, r.Status)
		require.Equal(t, "DiskQuotaExceeded", r.Error.Ename)
	}
	// The session goes on working.
	r = e.run(t, "q", "import os\nif os.path.exists('big'): os.remove('big')\n'fine'")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
}

func TestLocalDiskQuotaCheckOnly(t *testing.T) {
	_, mod := quotaWorkspace(t, true)
	e := newEnv(t, mod)
	r := e.run(t, "q", "open('outputs/big', 'wb').write(b'x' * (100 << 20))")
	require.Equal(t, api.StatusError, r.Status, "%+v", r)
	require.Equal(t, "DiskQuotaExceeded", r.Error.Ename)
	assert.Contains(t, r.Error.Evalue, "outputs/big")
	assert.Contains(t, strings.Join(r.Notes, "\n"), "quota: ")
	assert.Empty(t, r.Artifacts, "the excess is deleted before collection")
	r = e.run(t, "q", "import os; os.path.exists('outputs/big')")
	require.Equal(t, "False", r.Result)
}

func TestDockerDiskQuota(t *testing.T) {
	ws, mod := quotaWorkspace(t, false)
	if _, off := ws.DiskQuota(); off != "" {
		require.NotZero(t, os.Geteuid(), "as root sessions get disks of their own: %s", off)
	}
	e := newDockerEnv(t, testexec.Real{}, mod)
	e.run(t, "dq", "1")
	free := hostFree(t, ws.Root())
	r := e.run(t, "dq", fillCode)
	after := hostFree(t, ws.Root())
	t.Logf("status %s, stdout %q, notes %q; host free space fell by %d bytes", r.Status, r.Stdout, r.Notes, free-after)
	if _, off := ws.DiskQuota(); off == "" {
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		f := strings.Fields(r.Stdout)
		require.Len(t, f, 3, r.Stdout)
		assert.Equal(t, "ENOSPC", f[0])
		assert.Equal(t, "ENOSPC", f[1])
		assert.Less(t, free-after, int64(64<<20+16<<20))
	} else {
		require.Equal(t, api.StatusError, r.Status)
		require.Equal(t, "DiskQuotaExceeded", r.Error.Ename)
	}
	// Files written in the container are the host's to collect as usual.
	r = e.run(t, "dq", "import os\nif os.path.exists('big'): os.remove('big')\nopen('outputs/a.txt', 'w').write('hi')")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Len(t, r.Artifacts, 1)
	require.NoError(t, e.CloseSession(context.Background(), "dq"))
	assert.NoFileExists(t, filepath.Join(ws.Root(), "disks", "dq.img"))
}

func TestDockerDiskQuotaWarm(t *testing.T) {
	ws, mod := quotaWorkspace(t, false)
	if _, off := ws.DiskQuota(); off != "" {
		require.NotZero(t, os.Geteuid(), "as root sessions get disks of their own: %s", off)
		return
	}
	e := newDockerEnv(t, testexec.Real{}, func(o *executor.Options) { mod(o); o.Warm = 1 })
	require.Eventually(t, func() bool { return e.WarmReady() == 1 }, 60*time.Second, 50*time.Millisecond)
	// The warm container's disk moves to the session that takes it.
	r := e.run(t, "w1", fillCode+"open('outputs/a.txt', 'w').write('hi')\n")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	assert.True(t, strings.HasPrefix(r.Stdout, "ENOSPC ENOSPC "), r.Stdout)
	require.Len(t, r.Artifacts, 1)
	assert.FileExists(t, filepath.Join(ws.Root(), "sessions", "w1", "big"))
	assert.FileExists(t, filepath.Join(ws.Root(), "disks", "w1.img"))
}

func TestLocalArtifactsBudgetAndClose(t *testing.T) {
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(t.TempDir(), "ws"),
		MaxArtifactsTotalBytes: 250 << 10, RemoveArtifacts: true})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	e := newEnv(t, func(o *executor.Options) { o.Workspace = ws })
	// One session holds at most half the total (its share).
	r := e.run(t, "a", "for n in '123':\n    open('outputs/' + n, 'wb').write(n.encode() * (100 << 10))")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	assert.Len(t, r.Artifacts, 1)
	notes := strings.Join(r.Notes, "\n")
	assert.Contains(t, notes, "artifacts: ")
	assert.Contains(t, notes, "over its 128000-byte share (its disk quota, at most half of the artifacts directory's total); not collected")
	assert.Contains(t, notes, workspace.ErrSessionArtifactsFull.Error())
	// Another one's fits; a third one's meets the total.
	r = e.run(t, "b", "open('outputs/b', 'wb').write(b'b' * (100 << 10))")
	assert.Len(t, r.Artifacts, 1)
	r = e.run(t, "c", "open('outputs/c', 'wb').write(b'c' * (100 << 10))")
	assert.Empty(t, r.Artifacts)
	notes = strings.Join(r.Notes, "\n")
	assert.Contains(t, notes, "over its 256000-byte total limit; not collected")
	assert.Contains(t, notes, workspace.ErrArtifactsFull.Error())
	require.DirExists(t, filepath.Join(ws.ArtifactsDir(), "a"))
	require.NoError(t, e.CloseSession(context.Background(), "a"))
	assert.NoDirExists(t, filepath.Join(ws.ArtifactsDir(), "a"), "deleted on close")
	used, _ := ws.ArtifactsUsage()
	assert.EqualValues(t, 100<<10, used, "b's")
}
