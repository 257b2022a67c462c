package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
)

// artifactNamesCode writes outputs/ files of every kind of name issue 20 item 8
// found: kernelbox's temporary prefix (a file, and a directory), names that are
// not valid UTF-8 (a file, and a directory), beside ordinary ones.
const artifactNamesCode = `import os
os.makedirs("outputs/sub/.kb-tmp-dir", exist_ok=True)
os.makedirs(b"outputs/dir\xfe", exist_ok=True)
for name in [b"outputs/ok.txt", b"outputs/sub/fine.txt", b"outputs/.kb-tmp-mine.txt",
             b"outputs/sub/.kb-tmp-dir/inner.txt", b"outputs/bad\xffname.txt", b"outputs/dir\xfe/in.txt"]:
    with open(name, "w") as f:
        f.write("x")
print("written")`

// TestArtifactsListedAreDownloadable: every artifact a Result reports, and every
// one GET /v1/sessions/{id}/artifacts lists, downloads by its name (issue 20 item
// 8); the ones left out are named, escaped, in the Result's notes.
func TestArtifactsListedAreDownloadable(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	srv := callServer(t, nil, calls.Options{})
	resp, b := do(t, srv, http.MethodPost, "/v1/sessions/names/execute", `{"code":`+quote(artifactNamesCode)+`}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var res api.Result
	require.NoError(t, json.Unmarshal(b, &res))
	require.Equal(t, "ok", string(res.Status), "%s", b)

	downloadable := func(what string, arts []api.Artifact) []string {
		t.Helper()
		var names []string
		for _, a := range arts {
			names = append(names, a.Name)
			var segs []string
			for _, s := range strings.Split(a.Name, "/") {
				segs = append(segs, url.PathEscape(s))
			}
			resp, body := do(t, srv, http.MethodGet, "/v1/artifacts/names/"+strings.Join(segs, "/"), "")
			assert.Equal(t, http.StatusOK, resp.StatusCode, "%s %q is not downloadable: %s", what, a.Name, body)
		}
		return names
	}
	assert.Equal(t, []string{"ok.txt", "sub/fine.txt"}, downloadable("reported", res.Artifacts))
	notes := strings.Join(res.Notes, "\n")
	for _, want := range []string{`".kb-tmp-mine.txt"`, `"sub/.kb-tmp-dir"`, `"bad\xffname.txt"`, `"dir\xfe"`} {
		assert.Contains(t, notes, want+": ", "the Result does not say it left %s out", want)
	}

	resp, b = do(t, srv, http.MethodGet, "/v1/sessions/names/artifacts", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var list struct{ Artifacts []api.Artifact }
	require.NoError(t, json.Unmarshal(b, &list))
	assert.Equal(t, []string{"ok.txt", "sub/fine.txt"}, downloadable("listed", list.Artifacts))
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
