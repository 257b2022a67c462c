package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// openUnder returns the process's open files that lie under dir.
func openUnder(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, dir) {
			out = append(out, target)
		}
	}
	return out
}

// TestBuildUndoesOnFailure: a build that fails after the workspace opened (here
// on a templates file that is not there) closes the workspace again (undo.List):
// no file of the workspace stays open, and the error is the step's.
func TestBuildUndoesOnFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	nb := filepath.Join(dir, "in.ipynb")
	writeNB(t, nb, nil, "1 + 1")
	o, err := parseRunArgs([]string{"--backend", "none", "--workspace", ws, "--workdir", dir, nb}, io.Discard)
	require.NoError(t, err)
	f := o.engine
	en, err := f.build(context.Background(), slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	require.NotEmpty(t, openUnder(t, ws), "a built engine holds its workspace open (else this test shows nothing)")
	require.NoError(t, en.close())
	require.Empty(t, openUnder(t, ws))

	f.pool.templates = filepath.Join(dir, "missing.json")
	_, err = f.build(context.Background(), slog.New(slog.DiscardHandler), nil)
	require.ErrorContains(t, err, "missing.json")
	require.Empty(t, openUnder(t, ws), "the failed build left its workspace open")
}
