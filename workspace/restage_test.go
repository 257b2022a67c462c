//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// settledSources writes each content to a new file and waits until they are older
// than racyWindow, so that copies of them can be trusted by the next Stage.
func settledSources(t *testing.T, contents ...string) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i, c := range contents {
		p := filepath.Join(dir, string(rune('a'+i)))
		writeFile(t, p, c)
		paths = append(paths, p)
	}
	time.Sleep(racyWindow + 100*time.Millisecond)
	return paths
}

// stageOne stages src as name and returns what Stage said of it.
func stageOne(t *testing.T, s *Session, name, src string) Staged {
	t.Helper()
	staged, err := s.Stage([]Input{{Name: name, Source: src}})
	require.NoError(t, err)
	require.Len(t, staged, 1)
	return staged[0]
}

// TestRestageUnchanged: an input staged again while neither the source nor the copy
// changed is not copied again (the copy keeps its inode); any change on either side,
// even one that keeps the size and mtime, makes Stage copy.
func TestRestageUnchanged(t *testing.T) {
	t.Parallel()
	srcs := settledSources(t, "version one", "kept", "rewritten", "tampered", "deleted", "linked")
	m := newManager(t, func(o *Options) { o.HashInputs = true })
	s := openSession(t, m, "s")
	inputs := filepath.Join(s.Dir(), "inputs")
	names := []string{"kept", "src-rewritten", "copy-rewritten", "copy-deleted", "copy-linked"}
	for i, name := range names {
		first := stageOne(t, s, name, srcs[i+1])
		assert.False(t, first.Unchanged, name)
	}
	before, err := os.Stat(filepath.Join(inputs, "kept"))
	require.NoError(t, err)

	// The source rewritten in place, size and mtime restored: only ctime tells.
	rewrite := func(path, content string) {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
		require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
	}
	rewrite(srcs[2], "REWRITTEN")
	rewrite(filepath.Join(inputs, "copy-rewritten"), "TAMPERED")
	require.NoError(t, os.Remove(filepath.Join(inputs, "copy-deleted")))
	require.NoError(t, os.Remove(filepath.Join(inputs, "copy-linked")))
	require.NoError(t, os.Symlink(srcs[0], filepath.Join(inputs, "copy-linked")))

	want := map[string]string{"kept": "kept", "src-rewritten": "REWRITTEN", "copy-rewritten": "tampered",
		"copy-deleted": "deleted", "copy-linked": "linked"}
	for i, name := range names {
		got := stageOne(t, s, name, srcs[i+1])
		assert.Equal(t, name == "kept", got.Unchanged, name)
		assert.Equal(t, sha(want[name]), got.SHA256, name)
		assert.Equal(t, int64(len(want[name])), got.Size, name)
		fi, err := os.Lstat(filepath.Join(inputs, name))
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), name)
		assert.Equal(t, want[name], readFile(t, filepath.Join(inputs, name)), name)
	}
	after, err := os.Stat(filepath.Join(inputs, "kept"))
	require.NoError(t, err)
	assert.True(t, os.SameFile(before, after), "an unchanged input is not copied again")

	// The rewritten source is now too fresh to trust: it is copied on every call
	// until it has been stable for racyWindow.
	assert.False(t, stageOne(t, s, "src-rewritten", srcs[2]).Unchanged)
	// Another source under a name that was kept is copied.
	got := stageOne(t, s, "kept", srcs[0])
	assert.False(t, got.Unchanged)
	assert.Equal(t, "version one", readFile(t, filepath.Join(inputs, "kept")))
}

// TestRestageFreshSource: a source modified just before it was copied may change
// again without its stat showing it, so it is copied on every call.
func TestRestageFreshSource(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	src := filepath.Join(t.TempDir(), "live.log")
	writeFile(t, src, "one")
	assert.False(t, stageOne(t, s, "live.log", src).Unchanged)
	assert.False(t, stageOne(t, s, "live.log", src).Unchanged)
	writeFile(t, src, "two")
	assert.False(t, stageOne(t, s, "live.log", src).Unchanged)
	assert.Equal(t, "two", readFile(t, filepath.Join(s.Dir(), "inputs", "live.log")))
}

// TestRestageFailedCall: a Stage that fails leaves a kept input as it was, and
// still known.
func TestRestageFailedCall(t *testing.T) {
	t.Parallel()
	srcs := settledSources(t, "stable")
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	stageOne(t, s, "f", srcs[0])
	_, err := s.Stage([]Input{{Name: "f", Source: srcs[0]}, {Name: "g", Source: filepath.Join(t.TempDir(), "missing")}})
	require.Error(t, err)
	assert.True(t, stageOne(t, s, "f", srcs[0]).Unchanged)
	assert.Equal(t, "stable", readFile(t, filepath.Join(s.Dir(), "inputs", "f")))
}
