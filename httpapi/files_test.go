package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
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

// TestFilesRoundTrip: a CSV uploaded before the session exists is read by
// pandas in its kernel; a PNG the kernel wrote downloads byte for byte; the
// directory lists; a delete is seen by the kernel.
func TestFilesRoundTrip(t *testing.T) {
	srv := callServer(t, nil, calls.Options{})
	csv := "a,b\n1,10\n2,20\n3,30\n"
	resp, b := raw(t, srv, http.MethodPut, "/v1/sessions/f1/files/inputs/sub/data.csv", strings.NewReader(csv))
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
	var wrote api.FileWritten
	require.NoError(t, json.Unmarshal(b, &wrote))
	assert.Equal(t, api.FileWritten{SessionID: "f1", Path: "inputs/sub/data.csv", Size: int64(len(csv))}, wrote)
	// The session exists now, with no kernel yet.
	resp, b = do(t, srv, http.MethodGet, "/v1/sessions/f1", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.Contains(t, string(b), `"state":"new"`)

	out := run(t, srv, "f1", `import pandas as pd, hashlib, struct, zlib
df = pd.read_csv("inputs/sub/data.csv")
print(int(df.b.sum()))
def chunk(k, d): return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d) & 0xffffffff)
raw = b"".join(b"\x00" + bytes((x * y) % 256 for x in range(64) for _ in range(3)) for y in range(64))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 64, 64, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open("plot.png", "wb").write(png)
print(hashlib.sha256(png).hexdigest())`)
	lines := strings.Fields(out)
	require.Len(t, lines, 2, out)
	assert.Equal(t, "60", lines[0])

	resp, b = raw(t, srv, http.MethodGet, "/v1/sessions/f1/files/plot.png", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	sum := sha256.Sum256(b)
	assert.Equal(t, lines[1], hex.EncodeToString(sum[:]), "the PNG downloaded is the one written")
	assert.Equal(t, "image/png", resp.Header.Get("Content-Type"))
	assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	assert.Equal(t, "sandbox; default-src 'none'", resp.Header.Get("Content-Security-Policy"))
	assert.Equal(t, `attachment; filename=plot.png`, resp.Header.Get("Content-Disposition"))
	assert.EqualValues(t, len(b), resp.ContentLength)

	resp, b = raw(t, srv, http.MethodGet, "/v1/sessions/f1/files?path=inputs/sub", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var l api.FileListing
	require.NoError(t, json.Unmarshal(b, &l))
	require.Len(t, l.Entries, 1)
	assert.Equal(t, "data.csv", l.Entries[0].Name)
	assert.Equal(t, "file", l.Entries[0].Type)
	assert.EqualValues(t, len(csv), l.Entries[0].Size)
	resp, b = raw(t, srv, http.MethodGet, "/v1/sessions/f1/files", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.Contains(t, string(b), `"name":"plot.png"`)

	resp, b = raw(t, srv, http.MethodDelete, "/v1/sessions/f1/files/plot.png", nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", b)
	assert.Equal(t, "False", strings.TrimSpace(run(t, srv, "f1", `import os; print(os.path.exists("plot.png"))`)))
	resp, b = raw(t, srv, http.MethodGet, "/v1/sessions/f1/files/plot.png", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, api.CodeNotFound, errCode(t, b))

	// No-overwrite.
	resp, b = raw(t, srv, http.MethodPut, "/v1/sessions/f1/files/inputs/sub/data.csv", strings.NewReader("x"), "If-None-Match", "*")
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)
	assert.Equal(t, api.CodeExists, errCode(t, b))
	// Reads of a session the executor does not know are 404.
	resp, b = raw(t, srv, http.MethodGet, "/v1/sessions/nobody/files/x", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, api.CodeNotFound, errCode(t, b))
}

// TestFilesBadPaths: every bad path is refused with its code, and nothing
// outside the session is read or written, whatever the kernel planted.
func TestFilesBadPaths(t *testing.T) {
	srv := callServer(t, nil, calls.Options{})
	host := t.TempDir()
	secret := filepath.Join(host, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("host secret"), 0o644))
	run(t, srv, "bad", `import os
os.symlink(`+quote(secret)+`, "link")
os.symlink(`+quote(host)+`, "linkdir")
os.mkfifo("fifo")
open("plain", "w").write("x")`)
	long := strings.Repeat("n", 256)
	cases := []struct {
		path   string
		status int
		code   api.Code
	}{
		{"../x", 400, api.CodeInvalidPath},
		{"outputs/../../x", 400, api.CodeInvalidPath},
		{"%2Fetc%2Fpasswd", 400, api.CodeInvalidPath},
		{"/etc/passwd", 400, api.CodeInvalidPath},
		{"a%00b", 400, api.CodeInvalidPath},
		{"bad%FFname", 400, api.CodeInvalidPath},
		{long, 400, api.CodeInvalidPath},
		{strings.Repeat("d/", 2100) + "f", 400, api.CodeInvalidPath},
		{"link", 400, api.CodeInvalidPath},
		{"linkdir/secret.txt", 400, api.CodeInvalidPath},
		{"fifo", 400, api.CodeInvalidPath},
		{"outputs", 409, api.CodeIsDirectory},
		{"plain/x", 409, api.CodeNotDirectory},
	}
	for _, c := range cases {
		name := c.path
		if len(name) > 30 {
			name = name[:30]
		}
		t.Run(name, func(t *testing.T) {
			resp, b := raw(t, srv, http.MethodGet, "/v1/sessions/bad/files/"+c.path, nil)
			assert.Equal(t, c.status, resp.StatusCode, "%s", b)
			assert.Equal(t, c.code, errCode(t, b), "%s", b)
			assert.NotContains(t, string(b), "host secret")
		})
	}
	// Uploads through a planted link or to a bad path write nothing outside.
	for _, p := range []string{"linkdir/new.txt", "../new.txt", "%2Ftmp%2Fnew.txt", "outputs"} {
		resp, b := raw(t, srv, http.MethodPut, "/v1/sessions/bad/files/"+p, strings.NewReader("planted"))
		assert.GreaterOrEqual(t, resp.StatusCode, 400, "%s: %s", p, b)
		assert.Less(t, resp.StatusCode, 500, "%s: %s", p, b)
	}
	entries, err := os.ReadDir(host)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
	got, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "host secret", string(got))
	// An upload to the link replaces the link, never writes its target.
	resp, b := raw(t, srv, http.MethodPut, "/v1/sessions/bad/files/link", strings.NewReader("mine"))
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
	got, err = os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "host secret", string(got))
	assert.Equal(t, "mine", strings.TrimSpace(run(t, srv, "bad", `import os; print(os.path.islink("link") or open("link").read())`)))
}

// TestFilesBatch: a batch of 5 with 2 bad files gives 3 ok and 2 named errors.
func TestFilesBatch(t *testing.T) {
	srv := callServer(t, nil, calls.Options{})
	body, err := json.Marshal(api.FileBatch{
		Uploads: []api.FileUpload{
			{Path: "inputs/a.txt", Content: []byte("alpha")},
			{Path: "../escape.txt", Content: []byte("no")},
			{Path: "inputs/b.bin", Content: []byte{0, 1, 2, 255}},
		},
		Downloads: []api.FileDownload{{Path: "inputs/a.txt"}, {Path: "inputs/missing.txt"}},
	})
	require.NoError(t, err)
	resp, b := do(t, srv, http.MethodPost, "/v1/sessions/bt/files:batch", string(body))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var res api.FileBatchResult
	require.NoError(t, json.Unmarshal(b, &res))
	var statuses []api.Code
	for _, r := range append(res.Uploads, res.Downloads...) {
		statuses = append(statuses, r.Status)
	}
	assert.Equal(t, []api.Code{"ok", "invalid_path", "ok", "ok", "not_found"}, statuses, "%s", b)
	assert.Equal(t, "alpha", string(res.Downloads[0].Content))
	assert.NotEmpty(t, res.Uploads[1].Error)
	assert.Equal(t, "[0, 1, 2, 255]", strings.TrimSpace(run(t, srv, "bt", `print(list(open("inputs/b.bin","rb").read()))`)))
}

// TestFilesQueueBehindCalls: a file operation is a job on the session's worker,
// after the calls queued before it: a download asked while a call runs sees
// what that call wrote.
func TestFilesQueueBehindCalls(t *testing.T) {
	srv := callServer(t, nil, calls.Options{})
	run(t, srv, "q", "1")
	detach(t, srv, "q", `import time
time.sleep(1.5)
open("late.txt", "w").write("written late")`)
	resp, b := raw(t, srv, http.MethodGet, "/v1/sessions/q/files/late.txt", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.Equal(t, "written late", string(b))
}
