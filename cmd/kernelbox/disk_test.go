package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/workspace"
)

func TestDiskFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		want    workspace.Options
		wantErr string
	}{
		{nil, workspace.Options{DiskQuota: 4 << 30, MaxArtifactsTotalBytes: 8 << 30, MaxKeptSessions: 32}, ""},
		{[]string{"--disk-quota=64MiB", "--max-artifacts-bytes=1.5GB", "--artifacts-on-close=delete"},
			workspace.Options{DiskQuota: 64 << 20, MaxArtifactsTotalBytes: 1.5e9, RemoveArtifacts: true, MaxKeptSessions: 32}, ""},
		{[]string{"--disk-quota=0", "--max-artifacts-bytes=12345"}, workspace.Options{MaxArtifactsTotalBytes: 12345, MaxKeptSessions: 32}, ""},
		{[]string{"--disk-quota=2G"}, workspace.Options{DiskQuota: 2 << 30, MaxArtifactsTotalBytes: 8 << 30, MaxKeptSessions: 32}, ""},
		{[]string{"--max-kept-sessions=5"}, workspace.Options{DiskQuota: 4 << 30, MaxArtifactsTotalBytes: 8 << 30, MaxKeptSessions: 5}, ""},
		{[]string{"--max-kept-sessions=0"}, workspace.Options{DiskQuota: 4 << 30, MaxArtifactsTotalBytes: 8 << 30, MaxKeptSessions: -1}, ""},
		{[]string{"--disk-quota=lots"}, workspace.Options{}, "not a size"},
		{[]string{"--disk-quota=-1GiB"}, workspace.Options{}, "not a size"},
		{[]string{"--artifacts-on-close=archive"}, workspace.Options{}, "neither keep nor delete"},
	}
	for _, tt := range tests {
		var f diskFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.register(fs)
		err := fs.Parse(tt.args)
		var got workspace.Options
		if err == nil {
			err = f.apply(&got)
		}
		if tt.wantErr != "" {
			require.Error(t, err, tt.args)
			assert.Contains(t, err.Error(), tt.wantErr)
			continue
		}
		require.NoError(t, err, tt.args)
		assert.Equal(t, tt.want, got, tt.args)
	}
	q := byteSize(4 << 30)
	assert.Equal(t, "4GiB", q.String())
}

// TestServeDiskQuota is the must-show: a disk fill is refused at the
// quota, and the host's free space falls by no more than the quota.
func TestServeDiskQuota(t *testing.T) {
	py := testenv.Jupyter(t)
	ws, data := testDirs(t)
	_, url, log := rawServe(t, "--backend", "local", "--python", py, "--workspace", ws, "--workdir", data, "--disk-quota", "64MiB")
	execCLI(t, url, "q", "1")
	var before, after syscall.Statfs_t
	require.NoError(t, syscall.Statfs(ws, &before))
	r, _ := execCLI(t, url, "q", `import os, errno
fd = os.open('fill', os.O_CREAT | os.O_WRONLY)
try:
    os.posix_fallocate(fd, 0, 5 << 30); a = 'ok'
except OSError as e:
    a = errno.errorcode[e.errno]
os.close(fd)
os.remove('fill')  # a failed fallocate may keep what it got
n = 0
try:
    with open('fill2', 'wb') as f:
        while n < 200 << 20:
            n += f.write(os.urandom(1 << 20))
        os.fsync(f.fileno())
    w = 'ok'
except OSError as e:
    w = errno.errorcode[e.errno]
print(a, w, n)`)
	// Written back through the loop device to the host before counting.
	for _, dir := range []string{filepath.Join(ws, "sessions", "q"), ws} {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		require.NoError(t, err)
		require.NoError(t, unix.Syncfs(fd))
		unix.Close(fd)
	}
	require.NoError(t, syscall.Statfs(ws, &after))
	lost := (int64(before.Bfree) - int64(after.Bfree)) * before.Bsize
	t.Logf("stdout %q, status %s; host free space fell by %d bytes", r.Stdout, r.Status, lost)
	if os.Geteuid() != 0 {
		// Without root only the call-end check holds the session to the quota.
		require.Equal(t, api.StatusError, r.Status, "%+v\n%s", r, log)
		require.Equal(t, "DiskQuotaExceeded", r.Error.Ename)
		return
	}
	require.Equal(t, api.StatusOK, r.Status, "%+v\n%s", r.Error, log)
	require.True(t, strings.HasPrefix(r.Stdout, "ENOSPC ENOSPC "), r.Stdout)
	// Other processes share the host file system: some slack.
	require.Less(t, lost, int64(64<<20+16<<20))
}
