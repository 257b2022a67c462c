package statefile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	for _, sync := range []bool{true, false} {
		require.NoError(t, Write(p, []byte(`{"a":1}`), sync))
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		b, err := Read(p, 100)
		require.NoError(t, err)
		require.Equal(t, `{"a":1}`, string(b))
	}
	left, err := filepath.Glob(filepath.Join(dir, ".state.json.tmp-*"))
	require.NoError(t, err)
	require.Empty(t, left, "no temporary file is left")

	_, err = Read(p, 3)
	require.ErrorContains(t, err, "not a regular file of at most 3 bytes")
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(p, link))
	_, err = Read(link, 100)
	require.Error(t, err, "a link is not followed")
	_, err = Read(dir, 100)
	require.Error(t, err, "a directory")
	require.Error(t, Write(filepath.Join(dir, "missing", "x"), nil, false))
}
