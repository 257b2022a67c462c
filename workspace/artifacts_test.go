package workspace

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestArtifacts(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	writeFile(t, filepath.Join(s.Dir(), "outputs", "b", "table.csv"), "a,b\n")
	writeFile(t, filepath.Join(s.Dir(), "outputs", "a.png"), "png")
	writeFile(t, filepath.Join(s.Dir(), "outputs", "raw"), "\x00\x01binary")
	_, err := s.Collect()
	require.NoError(t, err)
	_, err = s.SaveDisplay("d.svg", []byte("<svg/>"), "image/svg+xml")
	require.NoError(t, err)
	// Leftovers that are not artifacts.
	writeFile(t, filepath.Join(m.ArtifactsDir(), "s", ".kb-tmp-0123"), "partial")
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(m.ArtifactsDir(), "s", "link")))

	arts, err := m.Artifacts("s")
	require.NoError(t, err)
	dir := filepath.Join(m.ArtifactsDir(), "s")
	assert.Equal(t, []Artifact{
		{Path: filepath.Join(dir, "a.png"), Name: "a.png", Size: 3, MIME: "image/png"},
		{Path: filepath.Join(dir, "b", "table.csv"), Name: "b/table.csv", Size: 4, MIME: arts[1].MIME},
		{Path: filepath.Join(dir, "display", "d.svg"), Name: "display/d.svg", Size: 6, MIME: "image/svg+xml"},
		{Path: filepath.Join(dir, "raw"), Name: "raw", Size: 8, MIME: "application/octet-stream"},
	}, arts)
	assert.Contains(t, arts[1].MIME, "text/", "csv is text whatever the system's mime.types says")

	none, err := m.Artifacts("nobody")
	require.NoError(t, err)
	assert.Empty(t, none)
	_, err = m.Artifacts("../s")
	assert.ErrorIs(t, err, ErrInvalidSession)
}

func TestArtifactPath(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	writeFile(t, filepath.Join(s.Dir(), "outputs", "sub", "ok.txt"), "ok")
	_, err := s.Collect()
	require.NoError(t, err)
	other := openSession(t, m, "other")
	writeFile(t, filepath.Join(other.Dir(), "outputs", "secret.txt"), "secret")
	_, err = other.Collect()
	require.NoError(t, err)
	dir := filepath.Join(m.ArtifactsDir(), "s")
	// Links someone planted in the artifacts tree.
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")))
	require.NoError(t, os.Symlink("../other", filepath.Join(dir, "otherdir")))
	require.NoError(t, os.Symlink("sub/ok.txt", filepath.Join(dir, "alias.txt")))
	writeFile(t, filepath.Join(dir, ".kb-tmp-1"), "partial")

	tests := []struct {
		session, name string
		is            error
	}{
		{"s", "sub/ok.txt", nil},
		{"s", "", ErrInvalidPath},
		{"s", ".", ErrInvalidPath},
		{"s", "..", ErrInvalidPath},
		{"s", "../other/secret.txt", ErrInvalidPath},
		{"s", "sub/../../other/secret.txt", ErrInvalidPath},
		{"s", "/etc/passwd", ErrInvalidPath},
		{"s", "./sub/ok.txt", ErrInvalidPath},
		{"s", "sub//ok.txt", ErrInvalidPath},
		{"s", "sub/ok.txt/", ErrInvalidPath},
		{"s", "sub/ok\x00.txt", ErrInvalidPath},
		{"s", "sub/ok\xff.txt", ErrInvalidPath},
		{"s", "sub/" + strings.Repeat("n", 256), ErrInvalidPath},
		{"s", strings.Repeat("d/", 2100) + "f", ErrInvalidPath},
		{"s", "passwd", ErrInvalidPath},
		{"s", "otherdir/secret.txt", ErrInvalidPath},
		{"s", "alias.txt", ErrInvalidPath},
		{"s", "missing.txt", ErrNotFound},
		{"s", "sub", ErrNotFound},
		{"s", "sub/ok.txt/x", ErrNotFound},
		{"s", ".kb-tmp-1", ErrNotFound},
		{"nobody", "x", ErrNotFound},
		{"..", "s/sub/ok.txt", ErrInvalidSession},
		{"", "x", ErrInvalidSession},
	}
	for _, tt := range tests {
		t.Run(tt.session+"/"+clipName(tt.name), func(t *testing.T) {
			t.Parallel()
			p, err := m.ArtifactPath(tt.session, tt.name)
			f, ferr := m.OpenArtifact(tt.session, tt.name)
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
				assert.ErrorIs(t, ferr, tt.is)
				assert.Empty(t, p)
				assert.Nil(t, f)
				return
			}
			require.NoError(t, err)
			require.NoError(t, ferr)
			defer f.Close()
			assert.Equal(t, filepath.Join(dir, "sub", "ok.txt"), p)
			b, err := io.ReadAll(f)
			require.NoError(t, err)
			assert.Equal(t, "ok", string(b))
		})
	}
}

// clipName keeps subtest names of over-long paths short.
func clipName(s string) string {
	if len(s) > 40 {
		return s[:40]
	}
	return s
}
