package executor_test

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/workspace"
)

// mountsUnder lists the mount points below dir (from /proc/self/mountinfo).
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			out = append(out, filepath.Base(fields[4]))
		}
	}
	slices.Sort(out)
	return out
}

// loopsUnder lists the image files below dir that back a loop device (from
// /sys/block/loop*/loop/backing_file).
func loopsUnder(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.HasPrefix(string(b), dir+"/") {
			out = append(out, strings.TrimSpace(string(b)))
		}
	}
	return out
}

// images lists the session disk images of the workspace.
func images(t *testing.T, ws *workspace.Manager) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(ws.Root(), "disks", "*.img"))
	require.NoError(t, err)
	for i, n := range names {
		names[i] = strings.TrimSuffix(filepath.Base(n), ".img")
	}
	slices.Sort(names)
	return names
}

// TestFakeIdleClosedSessionsLetTheirDisksGo is issue 33's item 3: with at most 2
// live sessions and an idle timeout, six sessions run in turn, each closed for
// being idle before the next. Each idle-closed session's disk is unmounted at
// once (mounts and loop devices are only the live sessions'), at most
// MaxKeptSessions images are kept, the session closed longest ago losing its
// files first, and a session that comes back finds its files (or is told they
// are gone). The executor's Close leaves nothing mounted.
func TestFakeIdleClosedSessionsLetTheirDisksGo(t *testing.T) {
	t.Parallel() // a fake backend and a workspace of its own: it counts mounts and loop devices under its own root only
	root := filepath.Join(t.TempDir(), "ws")
	ws, err := workspace.New(workspace.Options{Root: root, DiskQuota: 32 << 20, MaxKeptSessions: 3})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	_, off := ws.DiskQuota()
	if os.Geteuid() == 0 {
		require.Empty(t, off, "as root sessions get disks of their own")
	}
	e, _ := newFakeEnv(t, nil, func(o *executor.Options) {
		o.Workspace = ws
		o.MaxSessions = 2
		o.IdleTimeout = time.Second
	})
	sessions := filepath.Join(root, "sessions")
	ids := []string{"s1", "s2", "s3", "s4", "s5", "s6"}
	for i, id := range ids {
		e.run(t, id, "1")
		// What the session's code leaves in its directory.
		require.NoError(t, os.WriteFile(filepath.Join(sessions, id, "outputs", "f"), []byte(id), 0o644))
		if off == "" {
			assert.Equal(t, []string{id}, mountsUnder(t, sessions), "only the live session has a mount")
		}
		require.Eventually(t, func() bool { return len(e.Sessions()) == 0 }, 30*time.Second, 50*time.Millisecond, "%s closed for idleness", id)
		require.Eventually(t, func() bool { return len(mountsUnder(t, sessions)) == 0 && len(loopsUnder(t, root)) == 0 },
			10*time.Second, 20*time.Millisecond, "after %s closed: mounts %v, loop devices %v", id, mountsUnder(t, sessions), loopsUnder(t, root))
		want := ids[max(0, i-2) : i+1]
		assert.Equal(t, want, ws.KeptSessions(), "kept after %s closed", id)
		if off == "" {
			assert.Equal(t, want, images(t, ws), "images after %s closed", id)
		}
	}
	// Two sessions come back: s6 finds its files; s1's were deleted, and it
	// says so.
	r := e.run(t, "s6", "1")
	assert.True(t, r.StateLost)
	assert.Contains(t, strings.Join(r.Notes, "\n"), "its files remain")
	assert.Equal(t, "s6", string(must(os.ReadFile(filepath.Join(sessions, "s6", "outputs", "f")))))
	r = e.run(t, "s1", "1")
	assert.True(t, r.StateLost)
	assert.Contains(t, strings.Join(r.Notes, "\n"), "its files are gone")
	assert.NoFileExists(t, filepath.Join(sessions, "s1", "outputs", "f"))
	if off == "" {
		assert.Equal(t, []string{"s1", "s6"}, mountsUnder(t, sessions), "mounts are the live sessions'")
		assert.Len(t, loopsUnder(t, root), 2)
	}
	require.NoError(t, e.Close())
	require.NoError(t, ws.Close())
	assert.Empty(t, mountsUnder(t, sessions), "a clean shutdown unmounts every disk")
	require.Eventually(t, func() bool { return len(loopsUnder(t, root)) == 0 }, 10*time.Second, 20*time.Millisecond,
		"loop devices left: %v", loopsUnder(t, root))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
