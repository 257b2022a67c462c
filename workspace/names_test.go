package workspace

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCollectOnlyDownloadable is issue 20 item 8: every artifact Collect reports,
// and every one Artifacts lists, can be opened by the name a client reads from the
// JSON (what GET /v1/artifacts/{session}/{name} does). Files whose names start with
// kernelbox's temporary prefix, and names that are not valid UTF-8 (JSON would
// turn them into U+FFFD), are not collected; Collect says so once per file, naming
// it in escaped form.
func TestCollectOnlyDownloadable(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "s")
	out := filepath.Join(s.Dir(), "outputs")
	writeFile(t, filepath.Join(out, "ok.txt"), "ok")
	writeFile(t, filepath.Join(out, tempPrefix+"mine.txt"), "a user's file")
	writeFile(t, filepath.Join(out, "sub", tempPrefix+"dir", "inner.txt"), "in a dir of that prefix")
	writeFile(t, filepath.Join(out, "bad\xffname.txt"), "invalid UTF-8 name")
	writeFile(t, filepath.Join(out, "dir\xfe", "in.txt"), "in a dir with an invalid UTF-8 name")
	writeFile(t, filepath.Join(out, "sub", "fine.txt"), "fine")

	// openable checks that each artifact, named as a client decodes it from the
	// JSON, opens, and returns the names.
	openable := func(what string, arts []Artifact) []string {
		t.Helper()
		b, err := json.Marshal(arts)
		require.NoError(t, err)
		var decoded []Artifact
		require.NoError(t, json.Unmarshal(b, &decoded))
		var names []string
		for _, a := range decoded {
			names = append(names, a.Name)
			assert.True(t, utf8.ValidString(a.Name), "%s: %q is not valid UTF-8", what, a.Name)
			f, err := m.OpenArtifact("s", a.Name)
			if assert.NoError(t, err, "%s: %q is listed but cannot be downloaded", what, a.Name) {
				f.Close()
			}
		}
		return names
	}

	arts, err := s.Collect()
	assert.Equal(t, []string{"ok.txt", "sub/fine.txt"}, openable("collected", arts))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrSkippedName)
	for _, want := range []string{
		`collect ".kb-tmp-mine.txt": names kernelbox's temporary files (.kb-tmp-…): not collected`,
		`collect "sub/.kb-tmp-dir": names kernelbox's temporary files (.kb-tmp-…): not collected`,
		`collect "bad\xffname.txt": not valid UTF-8: not collected`,
		`collect "dir\xfe": not valid UTF-8: not collected`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	listed, err := m.Artifacts("s")
	require.NoError(t, err)
	assert.Equal(t, []string{"ok.txt", "sub/fine.txt"}, openable("listed", listed))

	// Reported once: the next Collect (the files unchanged) says nothing.
	arts, err = s.Collect()
	assert.NoError(t, err, "reported again")
	assert.Empty(t, arts)

	// Even a file of such a name already in the artifacts directory (put there by
	// an older kernelbox) is not listed.
	writeFile(t, filepath.Join(m.ArtifactsDir(), "s", "old\xffname.txt"), "old")
	listed, err = m.Artifacts("s")
	require.NoError(t, err)
	assert.Equal(t, []string{"ok.txt", "sub/fine.txt"}, openable("listed", listed))
	_ = os.Remove(filepath.Join(m.ArtifactsDir(), "s", "old\xffname.txt"))
}
