package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestArtifactsShareSparseFiles is issue 33's item 2: a session with a 32 MiB
// disk quota truncates three 1000 MiB files in outputs/ (holes, nothing
// written). Collection copied them dense, 2,001 MB into the artifacts directory
// in one call, until the total budget stopped it, and then another session's
// 28 MiB output was refused. Now each is refused (and said so) by the
// session's share, nothing is copied, and the other session's output is
// collected.
func TestArtifactsShareSparseFiles(t *testing.T) {
	const mib = 1 << 20
	m := newManager(t, func(o *Options) { o.DiskQuota = 32 * mib; o.MaxArtifactsTotalBytes = 2000 * 1000 * 1000 })
	assert.EqualValues(t, 32*mib, m.ArtifactsShare(), "the share is the quota")
	a := openSession(t, m, "a")
	for i := range 3 {
		f, err := os.Create(filepath.Join(a.Dir(), "outputs", fmt.Sprintf("sparse%d.bin", i)))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(1000*mib))
		require.NoError(t, f.Close())
	}
	arts, err := a.Collect()
	assert.Empty(t, arts)
	require.ErrorIs(t, err, ErrSessionArtifactsFull)
	require.ErrorIs(t, err, ErrArtifactsFull)
	for i := range 3 {
		assert.Contains(t, err.Error(), fmt.Sprintf(`collect "sparse%d.bin": session artifacts share exceeded: 1048576000 bytes, more than session a's whole 33554432-byte share`, i))
	}
	used, _ := m.ArtifactsUsage()
	assert.Zero(t, used)
	assert.Zero(t, m.countArtifacts("a"), "nothing copied")
	// Said once per version: the next call has nothing new to say about them.
	arts, err = a.Collect()
	assert.Empty(t, arts)
	require.NoError(t, err)

	b := openSession(t, m, "b")
	_, err = fill(filepath.Join(b.Dir(), "outputs", "real.bin"), 28*mib)
	require.NoError(t, err)
	arts, err = b.Collect()
	require.NoError(t, err)
	require.Len(t, arts, 1)
	assert.EqualValues(t, 28*mib, arts[0].Size)

	// Over several calls a session still holds at most its share: 20 MiB, then
	// another 20 MiB refused (it fits the disk once the first is deleted).
	require.NoError(t, os.Remove(filepath.Join(b.Dir(), "outputs", "real.bin")))
	c := openSession(t, m, "c")
	_, err = fill(filepath.Join(c.Dir(), "outputs", "one.bin"), 20*mib)
	require.NoError(t, err)
	_, err = c.Collect()
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(c.Dir(), "outputs", "one.bin")))
	_, err = fill(filepath.Join(c.Dir(), "outputs", "two.bin"), 20*mib)
	require.NoError(t, err)
	arts, err = c.Collect()
	assert.Empty(t, arts)
	require.ErrorIs(t, err, ErrSessionArtifactsFull)
	assert.Contains(t, err.Error(), "would take session c's artifacts (20971520 bytes) over its 33554432-byte share")
	used, _ = m.ArtifactsUsage()
	assert.EqualValues(t, 48*mib, used)
}

// TestArtifactsShareOf: how the per-session share is worked out from the
// options.
func TestArtifactsShareOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                   string
		quota, total, explicit int64
		want                   int64
	}{
		{"nothing set", 0, 0, 0, 0},
		{"quota only", 4 << 30, 0, 0, 4 << 30},
		{"total only: half", 0, 8 << 30, 0, 4 << 30},
		{"quota under half the total", 1 << 30, 8 << 30, 0, 1 << 30},
		{"quota over half the total", 6 << 30, 8 << 30, 0, 4 << 30},
		{"explicit", 1 << 30, 8 << 30, 100, 100},
		{"explicit over half the total", 0, 8 << 30, 6 << 30, 4 << 30},
		{"explicit none, with a total", 1 << 30, 8 << 30, -1, 4 << 30},
		{"explicit none, no total", 1 << 30, 0, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, func(o *Options) {
				o.DiskQuota, o.DiskQuotaCheckOnly = tc.quota, true
				o.MaxArtifactsTotalBytes, o.MaxSessionArtifactsBytes = tc.total, tc.explicit
			})
			assert.Equal(t, tc.want, m.ArtifactsShare())
		})
	}
}

// TestArtifactsShareAccounting: the count of a session's artifacts starts from
// what its part of the directory holds (a reopened session, artifacts of an
// earlier run), follows copies, replacements and removals, is forgotten when
// its last Session closes, and sees files deleted by hand after recountEvery.
func TestArtifactsShareAccounting(t *testing.T) {
	const kib = 1 << 10
	root := filepath.Join(t.TempDir(), "kb")
	writeFile(t, filepath.Join(root, "artifacts", "s", "old"), string(make([]byte, 30*kib)))
	m := newManager(t, func(o *Options) { o.Root = root; o.MaxSessionArtifactsBytes = 50 * kib })
	used, limit := m.ArtifactsUsage()
	assert.Zero(t, used+limit, "no total: ArtifactsUsage says so")
	s := openSession(t, m, "s")
	// 30 KiB there already: 25 more do not fit, 15 do.
	require.ErrorIs(t, m.reserve("s", 25*kib), ErrSessionArtifactsFull)
	require.NoError(t, m.reserve("s", 15*kib))
	m.release("s", 15*kib)
	// A display replaced by a smaller one gives the difference back.
	_, err := s.SaveDisplay("p.png", make([]byte, 20*kib), "image/png")
	require.NoError(t, err)
	_, err = s.SaveDisplay("p.png", make([]byte, 5*kib), "image/png")
	require.NoError(t, err)
	require.NoError(t, m.reserve("s", 15*kib))
	m.release("s", 15*kib)
	require.ErrorIs(t, m.reserve("s", 16*kib), ErrSessionArtifactsFull)
	// Another session's count is its own.
	require.NoError(t, m.reserve("t", 50*kib))
	// Deleted by hand: seen once the count is older than recountEvery.
	require.NoError(t, os.Remove(filepath.Join(m.ArtifactsDir(), "s", "old")))
	require.ErrorIs(t, m.reserve("s", 16*kib), ErrSessionArtifactsFull)
	m.budget.sessions["s"].recounted = m.budget.sessions["s"].recounted.Add(-recountEvery)
	require.NoError(t, m.reserve("s", 16*kib))
	m.release("s", 16*kib)
	// Closing the last Session forgets the count; the next open counts again.
	require.NoError(t, s.Close())
	assert.NotContains(t, m.budget.sessions, "s")
	writeFile(t, filepath.Join(m.ArtifactsDir(), "s", "more"), string(make([]byte, 40*kib)))
	openSession(t, m, "s")
	require.ErrorIs(t, m.reserve("s", 10*kib), ErrSessionArtifactsFull)
}
