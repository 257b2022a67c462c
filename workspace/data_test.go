package workspace

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostData builds a host directory with files, a nested directory, a symlink
// out of it and a FIFO.
func hostData(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.csv"), "1,2\n")
	writeFile(t, filepath.Join(dir, "nested", "deep", "b.txt"), "bee")
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")))
	require.NoError(t, os.Symlink("nested", filepath.Join(dir, "nested-link")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
	return dir
}

func TestAddData(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	require.NoError(t, s.AddData("ds", hostData(t), 0))

	data := filepath.Join(s.Dir(), "data")
	assert.Equal(t, []string{"ds"}, dirNames(t, data), "no temporary left")
	root := filepath.Join(data, "ds")
	assert.Equal(t, []string{"a.csv", "nested"}, dirNames(t, root), "links and the FIFO skipped")
	assert.Equal(t, "1,2\n", readFile(t, filepath.Join(root, "a.csv")))
	assert.Equal(t, "bee", readFile(t, filepath.Join(root, "nested", "deep", "b.txt")))
	modes := map[string]os.FileMode{
		"":                  0o555,
		"nested":            0o555,
		"nested/deep":       0o555,
		"a.csv":             0o444,
		"nested/deep/b.txt": 0o444,
	}
	for rel, want := range modes {
		fi, err := os.Lstat(filepath.Join(root, rel))
		require.NoError(t, err)
		assert.Equal(t, want, fi.Mode().Perm(), rel)
	}

	// Adding it again replaces the copy.
	newer := t.TempDir()
	writeFile(t, filepath.Join(newer, "only.txt"), "only")
	require.NoError(t, s.AddData("ds", newer, 0))
	assert.Equal(t, []string{"only.txt"}, dirNames(t, root))
	assert.Equal(t, []string{"ds"}, dirNames(t, data))
}

func TestAddDataRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		ds      string
		host    func(t *testing.T) string
		max     int64
		is      error
		message string
	}{
		{
			name: "over the size limit",
			ds:   "ds",
			host: hostData,
			max:  5, // a.csv (4) fits, b.txt (3) does not
			is:   ErrTooLarge,
		},
		{
			name:    "invalid name",
			ds:      "../ds",
			host:    hostData,
			is:      ErrInvalidName,
			message: `add data: name "../ds": contains '/': invalid file name`,
		},
		{
			name: "host dir is a file",
			ds:   "ds",
			host: func(t *testing.T) string {
				p := filepath.Join(t.TempDir(), "f")
				writeFile(t, p, "x")
				return p
			},
		},
		{
			name: "host dir is a symlink",
			ds:   "ds",
			host: func(t *testing.T) string {
				p := filepath.Join(t.TempDir(), "link")
				require.NoError(t, os.Symlink(t.TempDir(), p))
				return p
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, nil)
			s := openSession(t, m, "s")
			prev := t.TempDir()
			writeFile(t, filepath.Join(prev, "old.txt"), "old")
			require.NoError(t, s.AddData("ds", prev, 0))

			err := s.AddData(tt.ds, tt.host(t), tt.max)
			require.Error(t, err)
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
			}
			if tt.message != "" {
				assert.EqualError(t, err, tt.message)
			}
			assert.Equal(t, []string{"ds"}, dirNames(t, filepath.Join(s.Dir(), "data")), "no partial copy left")
			assert.Equal(t, "old", readFile(t, filepath.Join(s.Dir(), "data", "ds", "old.txt")), "earlier copy intact")
		})
	}
}
