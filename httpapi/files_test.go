package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/internal/testkit/filestest"
)

// raw sends a request whose path is sent exactly as given (not cleaned, not
// re-escaped), with the token.
func raw(t testing.TB, srv *httptest.Server, method, path string, body io.Reader, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+"/", body)
	require.NoError(t, err)
	req.URL.Opaque = "//" + req.URL.Host + path
	req.Header.Set("Authorization", "Bearer tok")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// run executes code in session and returns its stdout, failing unless it ran ok.
func run(t testing.TB, srv *httptest.Server, session, code string) string {
	t.Helper()
	resp, b := do(t, srv, http.MethodPost, "/v1/sessions/"+session+"/execute", `{"code":`+quote(code)+`}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var res api.Result
	require.NoError(t, json.Unmarshal(b, &res))
	require.Equal(t, "ok", string(res.Status), "%s", b)
	return res.Stdout
}

func errCode(t testing.TB, b []byte) api.Code {
	t.Helper()
	var eb api.ErrorBody
	require.NoError(t, json.Unmarshal(b, &eb), "%s", b)
	return eb.Error.Code
}

// filesTarget is srv as the files kit sees it.
func filesTarget(srv *httptest.Server) *filestest.Server {
	return &filestest.Server{URL: srv.URL, Token: "tok", Client: srv.Client()}
}

// TestFilesRoundTrip (local): a CSV uploaded before the session exists is read
// by pandas in its kernel; a PNG the kernel wrote downloads byte for byte; the
// directory lists; a delete is seen by the kernel (filestest.RoundTrip). The
// session an upload made has no kernel until its first call.
func TestFilesRoundTrip(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	srv := callServer(t, nil, calls.Options{})
	fs := filesTarget(srv)
	fs.Upload(t, "f0", "x.txt", "x")
	resp, b := do(t, srv, http.MethodGet, "/v1/sessions/f0", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.Contains(t, string(b), `"state":"new"`)
	filestest.RoundTrip(t, fs, "f1")
	filestest.ListBounds(t, fs, "f1")
}

// TestFilesBadPaths (local): every bad path is refused with its code, and
// nothing outside the session is read or written, whatever the kernel planted
// (filestest.BadPaths).
func TestFilesBadPaths(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	filestest.BadPaths(t, filesTarget(callServer(t, nil, calls.Options{})), "bad")
}

// TestFilesBatch (local): a batch of 5 with 2 bad files gives 3 ok and 2 named
// errors (filestest.Batch).
func TestFilesBatch(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	filestest.Batch(t, filesTarget(callServer(t, nil, calls.Options{})), "bt")
}

// TestFilesQueueBehindCalls: a file operation is a job on the session's worker,
// after the calls queued before it: a download asked while a call runs sees
// what that call wrote.
func TestFilesQueueBehindCalls(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	srv := callServer(t, nil, calls.Options{})
	run(t, srv, "q", "1")
	detach(t, srv, "q", `import time
time.sleep(1.5)
open("late.txt", "w").write("written late")`)
	resp, b := raw(t, srv, http.MethodGet, "/v1/sessions/q/files/late.txt", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.Equal(t, "written late", string(b))
}
