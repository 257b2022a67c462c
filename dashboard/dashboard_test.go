package dashboard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/dashboard"
)

func get(t testing.TB, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func body(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	h := dashboard.New(dashboard.Options{})
	tests := []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8"},
		{"HEAD", "/", 200, "text/html; charset=utf-8"},
		{"GET", "/ui/app.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/ui/api.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/ui/calls.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/ui/render.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/ui/artifacts.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/ui/files.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/ui/download.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/ui/durable.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/ui/style.css", 200, "text/css; charset=utf-8"},
		{"GET", "/ui/frame.css", 200, "text/css; charset=utf-8"},
		{"GET", "/ui/icon.svg", 200, "image/svg+xml"},
		{"GET", "/ui/", 404, ""},
		{"GET", "/ui/missing.js", 404, ""},
		{"GET", "/ui/../page.html", 404, ""},
		{"GET", "/page.html", 404, ""},
		{"GET", "/index.html", 404, ""},
		{"POST", "/", 405, ""},
		{"DELETE", "/ui/app.js", 405, ""},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			resp := get(t, h, tc.method, tc.path)
			require.Equal(t, tc.status, resp.StatusCode)
			if tc.ctype != "" {
				require.Equal(t, tc.ctype, resp.Header.Get("Content-Type"))
			}
			// Every answer, errors included, carries the policy.
			require.Equal(t, dashboard.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
			require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
		})
	}
}

// TestPolicy checks the policy's promises: no inline or eval'd script, no remote
// origin of any kind, images from blobs and data URLs, nothing may frame the page,
// forms cannot submit (so a token can never land in a URL).
func TestPolicy(t *testing.T) {
	t.Parallel()
	p := dashboard.ContentSecurityPolicy
	for _, want := range []string{
		"default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' blob: data:",
		"connect-src 'self'", "frame-ancestors 'none'", "form-action 'none'", "object-src 'none'", "base-uri 'none'",
	} {
		require.Contains(t, p, want)
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*"} {
		require.NotContains(t, p, bad)
	}
}

// TestShell: the page is a shell with no data and no inline script or style, whose
// assets are all local, and the title is escaped.
func TestShell(t *testing.T) {
	t.Parallel()
	h := dashboard.New(dashboard.Options{Title: `box <script>alert(1)</script>`})
	resp := get(t, h, "GET", "/")
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	page := body(t, resp)
	require.NotContains(t, page, "<script>alert(1)")
	require.Contains(t, page, "box &lt;script&gt;alert(1)&lt;/script&gt;")
	require.Regexp(t, `<script type="module" src="/ui/app.js"></script>`, page)
	require.NotRegexp(t, `<script[^>]*>[^<]`, page, "inline script")
	require.NotRegexp(t, `<style|style=`, page, "inline style")
	require.NotRegexp(t, `(src|href)="(https?:)?//`, page, "remote asset")
	// Every local asset the page names exists.
	for _, m := range regexp.MustCompile(`(?:src|href)="(/ui/[^"]+)"`).FindAllStringSubmatch(page, -1) {
		require.Equal(t, 200, get(t, h, "GET", m[1]).StatusCode, m[1])
	}
	// The token field has no name, so a form submission could not carry it.
	require.Regexp(t, `<input id="token" type="password"[^>]*>`, page)
	require.NotRegexp(t, `<input id="token"[^>]*name=`, page)
}

// TestScripts checks the scripts' safety rules by reading them: cell output never
// goes through innerHTML or similar, iframes are sandboxed without allow-same-origin,
// only passive content gets a blob: URL, and the token travels in a header only.
func TestScripts(t *testing.T) {
	t.Parallel()
	h := dashboard.New(dashboard.Options{})
	var all strings.Builder
	for _, f := range []string{"app.js", "api.js", "calls.js", "render.js", "artifacts.js", "files.js", "download.js"} {
		resp := get(t, h, "GET", "/ui/"+f)
		require.Equal(t, 200, resp.StatusCode, f)
		all.WriteString(body(t, resp))
	}
	js := all.String()
	// Comments may name these; code may not, so comment lines are left out.
	code := regexp.MustCompile(`(?m)^\s*(//|/?\*).*$`).ReplaceAllString(js, "")
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
		"new Function", "allow-", "EventSource", "localStorage", "?token", "&token", "cookie"} {
		require.Falsef(t, strings.Contains(code, bad), "the dashboard's scripts use %q", bad)
	}
	// Active content never gets a URL of this origin (issue 20 item 3): the one call
	// that makes blob: URLs is objectURL's, which refuses all but passive types.
	require.Equal(t, 1, strings.Count(code, "URL.createObjectURL("), "blob: URLs made outside objectURL")
	require.Contains(t, code, "if (!passiveTypes.has(blob.type))")
	require.Contains(t, js, `f.setAttribute("sandbox", "")`)
	require.Contains(t, js, `"Authorization", "Bearer "`)
	require.Contains(t, js, "sessionStorage")
}

// TestSessionFilesScript: the session files list renders nothing a session
// wrote: no image, frame, object or link of its own, every download saved
// through saveFile as application/octet-stream; and the list is not polled
// (a listing is a job on the session's worker and counts as its activity).
func TestSessionFilesScript(t *testing.T) {
	t.Parallel()
	h := dashboard.New(dashboard.Options{})
	strip := regexp.MustCompile(`(?m)^\s*(//|/?\*).*$`)
	code := func(f string) string {
		resp := get(t, h, "GET", "/ui/"+f)
		require.Equal(t, 200, resp.StatusCode, f)
		return strip.ReplaceAllString(body(t, resp), "")
	}
	files, download := code("files.js"), code("download.js")
	for _, bad := range []string{`"img"`, `"iframe"`, `"object"`, `"embed"`, `"a"`, ".src", "href", "srcdoc", "objectURL", "createObjectURL", "setInterval", "setTimeout"} {
		require.Falsef(t, strings.Contains(files, bad), "files.js uses %q", bad)
	}
	require.Contains(t, files, "saveFile(filePath(session, path), name)")
	require.Contains(t, download, `api.getBlob(path, "application/octet-stream")`)
	require.Contains(t, download, "objectURL(blob)")
	page := body(t, get(t, h, "GET", "/"))
	for _, id := range []string{"files", "files-msg", "files-path", "files-up", "files-refresh"} {
		require.Contains(t, page, `id="`+id+`"`)
	}
}
