// Package filestest holds the session files API's must-show checks (issue 23),
// written once and run over HTTP against every backend, so that local, docker
// and remote are held to the same results and the same codes: RoundTrip (a CSV
// uploaded and read by pandas in the kernel, a PNG the kernel wrote downloaded
// byte for byte, list, delete), BadPaths (every bad path and everything a
// kernel can plant refused, nothing outside the session read or written),
// Batch (5 files, 2 bad: 3 ok and 2 named errors) and OverQuota (refused,
// nothing left). Start with Server; the callers are httpapi's tests (local,
// docker) and backends/remote's.
package filestest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
)

// Server is a kernelbox HTTP API under test.
type Server struct {
	// URL is the API's base URL, without a trailing slash.
	URL string
	// Token is sent as a bearer token.
	Token string
	// Client sends the requests. Defaults to http.DefaultClient.
	Client *http.Client
	// Reserved are names the backend keeps in a session directory of its own
	// (the remote kernel's session marker): never listed, each refused as
	// invalid_path.
	Reserved []string
}

// Do sends a request whose path is sent exactly as given (not cleaned, not
// re-escaped, so "../x" reaches the server as such), with the token and hdr
// (name, value pairs), and returns the answer with its whole body.
func (s *Server) Do(t testing.TB, method, path string, body io.Reader, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+"/", body)
	require.NoError(t, err)
	req.URL.Opaque = "//" + req.URL.Host + path
	req.Header.Set("Authorization", "Bearer "+s.Token)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := s.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// Run executes code in session through the API and returns its stdout,
// failing t unless it ran ok.
func (s *Server) Run(t testing.TB, session, code string) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"code": code, "timeout_seconds": 120})
	require.NoError(t, err)
	resp, b := s.Do(t, http.MethodPost, "/v1/sessions/"+session+"/execute", strings.NewReader(string(body)), "Content-Type", "application/json")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var res api.Result
	require.NoError(t, json.Unmarshal(b, &res))
	require.Equal(t, api.StatusOK, res.Status, "%s", b)
	return res.Stdout
}

// Code is the error code of an API error body.
func Code(t testing.TB, b []byte) api.Code {
	t.Helper()
	var eb api.ErrorBody
	require.NoError(t, json.Unmarshal(b, &eb), "%s", b)
	return eb.Error.Code
}

// Upload PUTs content to path in session and fails t unless it was written.
func (s *Server) Upload(t testing.TB, session, path, content string) {
	t.Helper()
	resp, b := s.Do(t, http.MethodPut, "/v1/sessions/"+session+"/files/"+path, strings.NewReader(content))
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// pngCode writes a 64x64 RGB PNG made by hand (no plotting library needed) to
// plot.png and prints its SHA-256.
const pngCode = `import hashlib, struct, zlib
def chunk(k, d): return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d) & 0xffffffff)
raw = b"".join(b"\x00" + bytes((x * y) % 256 for x in range(64) for _ in range(3)) for y in range(64))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 64, 64, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open("plot.png", "wb").write(png)
print(hashlib.sha256(png).hexdigest())`

// RoundTrip: a CSV uploaded to a session that does not exist yet creates it
// and pandas reads it in the kernel; a PNG the kernel wrote downloads byte for
// byte (same SHA-256) as an attachment with the safety headers, and so does an
// HTML file (never rendered as the API's origin); the directory lists; a
// delete is seen by the kernel and the file is then not_found; If-None-Match
// refuses to overwrite; a directory is deleted only recursively; the files of
// a session that does not exist are not_found.
func RoundTrip(t *testing.T, s *Server, session string) {
	base := "/v1/sessions/" + session + "/files"
	csv := "a,b\n1,10\n2,20\n3,30\n"
	resp, b := s.Do(t, http.MethodPut, base+"/inputs/sub/data.csv", strings.NewReader(csv))
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
	var wrote api.FileWritten
	require.NoError(t, json.Unmarshal(b, &wrote))
	assert.Equal(t, api.FileWritten{SessionID: session, Path: "inputs/sub/data.csv", Size: int64(len(csv))}, wrote)
	resp, b = s.Do(t, http.MethodGet, "/v1/sessions/"+session, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the upload created the session: %s", b)

	out := strings.Fields(s.Run(t, session, "import pandas as pd\ndf = pd.read_csv(\"inputs/sub/data.csv\")\nprint(int(df.b.sum()), len(df))\n"+pngCode))
	require.Len(t, out, 3, "%q", out)
	assert.Equal(t, []string{"60", "3"}, out[:2], "pandas read the uploaded CSV")

	resp, b = s.Do(t, http.MethodGet, base+"/plot.png", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.Equal(t, out[2], sum(b), "the PNG downloaded is the one the kernel wrote")
	assert.Equal(t, "image/png", resp.Header.Get("Content-Type"))
	assert.EqualValues(t, len(b), resp.ContentLength)
	safetyHeaders(t, resp, "plot.png")

	// Active content a kernel wrote is an attachment too, sandboxed and never sniffed.
	page := "<html><script>document.title='ran'</script><svg onload=alert(1)></svg></html>"
	s.Upload(t, session, "outputs/page.html", page)
	resp, b = s.Do(t, http.MethodGet, base+"/outputs/page.html", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.Equal(t, page, string(b))
	safetyHeaders(t, resp, "page.html")
	roundTripList(t, s, session, len(csv))
	roundTripDelete(t, s, session, len(csv))
}

// roundTripList: listings of a directory and of the session show what was
// uploaded and written, and never a reserved name.
func roundTripList(t *testing.T, s *Server, session string, csvSize int) {
	base := "/v1/sessions/" + session + "/files"
	resp, b := s.Do(t, http.MethodGet, base+"?path=inputs/sub", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var l api.FileListing
	require.NoError(t, json.Unmarshal(b, &l))
	assert.Equal(t, "inputs/sub", l.Path)
	require.Len(t, l.Entries, 1, "%s", b)
	assert.Equal(t, "data.csv", l.Entries[0].Name)
	assert.Equal(t, "file", l.Entries[0].Type)
	assert.EqualValues(t, csvSize, l.Entries[0].Size)
	assert.WithinDuration(t, time.Now(), l.Entries[0].ModTime, 10*time.Minute)
	resp, b = s.Do(t, http.MethodGet, base, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	l = api.FileListing{}
	require.NoError(t, json.Unmarshal(b, &l))
	types := map[string]string{}
	for _, e := range l.Entries {
		types[e.Name] = e.Type
	}
	assert.Equal(t, "file", types["plot.png"], "%s", b)
	assert.Equal(t, "dir", types["inputs"], "%s", b)
	for _, r := range s.Reserved {
		assert.NotContains(t, types, r, "a reserved name is listed")
	}

}

// roundTripDelete: deletes, no-overwrite uploads and unknown sessions answer
// with their codes.
func roundTripDelete(t *testing.T, s *Server, session string, csvSize int) {
	base := "/v1/sessions/" + session + "/files"
	resp, b := s.Do(t, http.MethodDelete, base+"/plot.png", nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", b)
	assert.Equal(t, "False", strings.TrimSpace(s.Run(t, session, `import os; print(os.path.exists("plot.png"))`)))
	resp, b = s.Do(t, http.MethodGet, base+"/plot.png", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", b)
	assert.Equal(t, api.CodeNotFound, Code(t, b))
	resp, b = s.Do(t, http.MethodDelete, base+"/plot.png", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", b)
	assert.Equal(t, api.CodeNotFound, Code(t, b))

	resp, b = s.Do(t, http.MethodPut, base+"/inputs/sub/data.csv", strings.NewReader("x"), "If-None-Match", "*")
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode, "%s", b)
	assert.Equal(t, api.CodeExists, Code(t, b))
	assert.Equal(t, strconv.Itoa(csvSize), strings.TrimSpace(s.Run(t, session, `import os; print(os.path.getsize("inputs/sub/data.csv"))`)), "not overwritten")

	resp, b = s.Do(t, http.MethodDelete, base+"/inputs", nil)
	assert.Equal(t, http.StatusConflict, resp.StatusCode, "%s", b)
	assert.Equal(t, api.CodeIsDirectory, Code(t, b))
	resp, b = s.Do(t, http.MethodDelete, base+"/inputs?recursive=1", nil)
	assert.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", b)
	assert.Equal(t, "False", strings.TrimSpace(s.Run(t, session, `import os; print(os.path.exists("inputs/sub/data.csv"))`)))

	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		resp, b = s.Do(t, m, "/v1/sessions/"+session+"-nobody/files/x", nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s %s", m, b)
		assert.Equal(t, api.CodeNotFound, Code(t, b))
	}
	resp, b = s.Do(t, http.MethodGet, "/v1/sessions/"+session+"-nobody/files", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", b)
}

// safetyHeaders checks that a download is an attachment a browser neither
// sniffs nor runs anything of.
func safetyHeaders(t testing.TB, resp *http.Response, name string) {
	t.Helper()
	assert.Equal(t, "attachment; filename="+name, resp.Header.Get("Content-Disposition"))
	assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	assert.Equal(t, "sandbox; default-src 'none'", resp.Header.Get("Content-Security-Policy"))
}

// BadPaths: each bad path (escaping, absolute, NUL, invalid UTF-8, over-long),
// and each symbolic link (to a host file, to a host directory), FIFO and
// directory the kernel planted, is refused with the code a local session gives
// by download, upload, delete and listing alike; nothing outside the session
// is read, written or deleted, and an upload to a planted link replaces the
// link, never its target.
func BadPaths(t *testing.T, s *Server, session string) {
	host := t.TempDir()
	secret := filepath.Join(host, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("host secret"), 0o644))
	s.Run(t, session, `import os
os.symlink(`+strconv.Quote(secret)+`, "link")
os.symlink(`+strconv.Quote(host)+`, "linkdir")
os.symlink("/etc/passwd", "passwd")
os.mkfifo("fifo")
os.makedirs("outputs", exist_ok=True)
open("plain", "w").write("x")`)
	badReads(t, s, session)
	badListings(t, s, session)
	badWrites(t, s, session, host, secret)
	linksReplaced(t, s, session, secret)
}

// bad is a path the files routes must refuse, and how.
type bad struct {
	path   string
	status int
	code   api.Code
}

// invalid is a path refused as invalid_path.
func invalid(p string) bad { return bad{p, http.StatusBadRequest, api.CodeInvalidPath} }

// noSecret checks that an answer holds neither the planted host secret nor
// /etc/passwd.
func noSecret(t testing.TB, b []byte) {
	t.Helper()
	assert.NotContains(t, string(b), "host secret")
	assert.NotContains(t, string(b), "root:x:0:0")
}

// badReads: downloads of bad paths and of what the kernel planted are refused
// with their codes.
func badReads(t *testing.T, s *Server, session string) {
	base := "/v1/sessions/" + session + "/files/"
	cases := []bad{
		invalid("../x"),
		invalid("outputs/../../x"),
		invalid("..%2F..%2Fetc%2Fpasswd"),
		invalid("%2Fetc%2Fpasswd"), // an absolute path, escaped
		invalid("/etc/passwd"),     // an absolute path as sent: ".../files//etc/passwd"
		invalid("a%00b"),
		invalid("bad%FFname"),
		invalid("ok/%C0%AF"), // an overlong encoding of "/"
		invalid(strings.Repeat("n", 256)),
		invalid(strings.Repeat("d/", 2100) + "f"),
		invalid(".kb-tmp-x"),
		invalid("link"),
		invalid("linkdir/secret.txt"),
		invalid("passwd"),
		invalid("fifo"),
		{"outputs", http.StatusConflict, api.CodeIsDirectory},
		{"plain/x", http.StatusConflict, api.CodeNotDirectory},
		{"missing", http.StatusNotFound, api.CodeNotFound},
	}
	for _, r := range s.Reserved {
		cases = append(cases, invalid(r))
	}
	for _, c := range cases {
		name := c.path
		if len(name) > 30 {
			name = name[:30]
		}
		t.Run(name, func(t *testing.T) {
			resp, b := s.Do(t, http.MethodGet, base+c.path, nil)
			assert.Equal(t, c.status, resp.StatusCode, "%s", b)
			assert.Equal(t, c.code, Code(t, b), "%s", b)
			noSecret(t, b)
		})
	}
}

// badListings: the same refusals for a listing, where the path is a directory.
func badListings(t *testing.T, s *Server, session string) {
	for _, c := range []bad{
		invalid("..%2Fx"), invalid("%2Fetc"), invalid("linkdir"), invalid("a%00b"), invalid("bad%FFname"),
		{"plain", http.StatusConflict, api.CodeNotDirectory}, {"missing", http.StatusNotFound, api.CodeNotFound},
	} {
		resp, b := s.Do(t, http.MethodGet, "/v1/sessions/"+session+"/files?path="+c.path, nil)
		assert.Equal(t, c.status, resp.StatusCode, "list %s: %s", c.path, b)
		assert.Equal(t, c.code, Code(t, b), "list %s: %s", c.path, b)
		noSecret(t, b)
	}
}

// badWrites: uploads and deletes of bad paths, or through anything planted,
// write and delete nothing anywhere.
func badWrites(t *testing.T, s *Server, session, host, secret string) {
	base := "/v1/sessions/" + session + "/files/"
	// Uploads to a bad path, or through anything planted, write nothing anywhere.
	for _, c := range []bad{
		invalid("../new.txt"), invalid("%2Ftmp%2Fnew.txt"), invalid("linkdir/new.txt"), invalid("a%00b"),
		invalid("bad%FFname"), invalid(strings.Repeat("n", 256)), invalid("link/x"),
		{"outputs", http.StatusConflict, api.CodeIsDirectory}, {"plain/x", http.StatusConflict, api.CodeNotDirectory},
		{"fifo/x", http.StatusConflict, api.CodeNotDirectory},
	} {
		resp, b := s.Do(t, http.MethodPut, base+c.path, strings.NewReader("planted"))
		assert.Equal(t, c.status, resp.StatusCode, "put %s: %s", c.path, b)
		assert.Equal(t, c.code, Code(t, b), "put %s: %s", c.path, b)
	}
	// Deletes through a planted link or of a bad path delete nothing outside.
	for _, p := range []string{"linkdir/secret.txt", "../" + filepath.Base(host), "%2Fetc%2Fpasswd"} {
		resp, b := s.Do(t, http.MethodDelete, base+p, nil)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "delete %s: %s", p, b)
		assert.Equal(t, api.CodeInvalidPath, Code(t, b), "delete %s: %s", p, b)
	}
	entries, err := os.ReadDir(host)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing was written outside the session")
	got, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "host secret", string(got))

}

// linksReplaced: writing to a planted link's own name replaces the link;
// deleting one deletes the link, never its target.
func linksReplaced(t *testing.T, s *Server, session, secret string) {
	base := "/v1/sessions/" + session + "/files/"
	s.Upload(t, session, "link", "mine")
	got, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "host secret", string(got), "the link's target is untouched")
	assert.Equal(t, "False mine", strings.TrimSpace(s.Run(t, session, `import os; print(os.path.islink("link"), open("link").read())`)))
	resp, b := s.Do(t, http.MethodDelete, base+"linkdir", nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", b)
	_, err = os.Stat(secret)
	assert.NoError(t, err, "deleting a link left its target alone")
}

// Batch: a batch of 5 files, 2 of them bad (an escaping upload, a missing
// download), gives 3 ok and 2 errors, each named with its code and why; the
// good uploads reach the kernel.
func Batch(t *testing.T, s *Server, session string) {
	body, err := json.Marshal(api.FileBatch{
		Uploads: []api.FileUpload{
			{Path: "inputs/a.txt", Content: []byte("alpha")},
			{Path: "../escape.txt", Content: []byte("no")},
			{Path: "inputs/b.bin", Content: []byte{0, 1, 2, 255}},
		},
		Downloads: []api.FileDownload{{Path: "inputs/a.txt"}, {Path: "inputs/missing.txt"}},
	})
	require.NoError(t, err)
	resp, b := s.Do(t, http.MethodPost, "/v1/sessions/"+session+"/files:batch", strings.NewReader(string(body)), "Content-Type", "application/json")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var res api.FileBatchResult
	require.NoError(t, json.Unmarshal(b, &res))
	var statuses []api.Code
	for _, r := range append(res.Uploads, res.Downloads...) {
		statuses = append(statuses, r.Status)
	}
	assert.Equal(t, []api.Code{"ok", "invalid_path", "ok", "ok", "not_found"}, statuses, "%s", b)
	require.Len(t, res.Downloads, 2)
	assert.Equal(t, "alpha", string(res.Downloads[0].Content))
	assert.EqualValues(t, 4, res.Uploads[2].Size)
	assert.Equal(t, "../escape.txt", res.Uploads[1].Path)
	assert.NotEmpty(t, res.Uploads[1].Error)
	assert.Equal(t, "inputs/missing.txt", res.Downloads[1].Path)
	assert.NotEmpty(t, res.Downloads[1].Error)
	assert.Equal(t, "[0, 1, 2, 255]", strings.TrimSpace(s.Run(t, session, `print(list(open("inputs/b.bin","rb").read()))`)))
}

// OverQuota: on a session held to quota bytes, an upload of twice that is 507
// quota and leaves no file, whole or partial (the kernel sees none); one of
// half fits after.
func OverQuota(t *testing.T, s *Server, session string, quota int64) {
	resp, b := s.Do(t, http.MethodPut, "/v1/sessions/"+session+"/files/inputs/big.bin", bytes.NewReader(make([]byte, 2*quota)))
	assert.Equal(t, http.StatusInsufficientStorage, resp.StatusCode, "%s", b)
	assert.Equal(t, api.CodeQuota, Code(t, b))
	skip := `{".kernelbox-session"}`
	out := s.Run(t, session, `import os
print(sorted(os.path.join(d, n) for d, _, fs in os.walk(".") for n in fs if n not in `+skip+`))`)
	assert.Equal(t, "[]", strings.TrimSpace(out), "no file, whole or partial, is left")
	resp, b = s.Do(t, http.MethodPut, "/v1/sessions/"+session+"/files/inputs/fits.bin", bytes.NewReader(make([]byte, quota/2)))
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
	assert.Equal(t, strconv.FormatInt(quota/2, 10), strings.TrimSpace(s.Run(t, session, `import os; print(os.path.getsize("inputs/fits.bin"))`)))
}

// ListBounds: a listing holds at most the entries asked for (max), and never
// more than api.DefaultMaxListEntries whatever max asks, with truncated
// set, even of a directory the kernel filled with more empty files than that.
func ListBounds(t *testing.T, s *Server, session string) {
	const limit = 10_000
	s.Run(t, session, `import os
os.makedirs("many", exist_ok=True)
for i in range(`+strconv.Itoa(limit+50)+`):
    open(f"many/f{i:05d}", "w").close()`)
	list := func(query string) api.FileListing {
		t.Helper()
		resp, b := s.Do(t, http.MethodGet, "/v1/sessions/"+session+"/files?path=many"+query, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%.300s", b)
		var l api.FileListing
		require.NoError(t, json.Unmarshal(b, &l))
		return l
	}
	l := list("&max=3")
	assert.Len(t, l.Entries, 3)
	assert.True(t, l.Truncated)
	for _, q := range []string{"", "&max=1000000000"} {
		l = list(q)
		assert.Len(t, l.Entries, limit, "max%s", q)
		assert.True(t, l.Truncated)
	}
	resp, b := s.Do(t, http.MethodGet, "/v1/sessions/"+session+"/files?path=many&max=-1", nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", b)
}
