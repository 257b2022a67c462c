// Package dashboard serves kernelbox's live session dashboard: one HTML page at "/"
// and its static assets under [AssetPrefix]. Start reading at [New].
//
// The page is a shell: it carries no session data and needs no token to load. Its
// script reads everything through the HTTP API (/v1/...) with the bearer token the
// user typed into its login form, kept in the tab's sessionStorage and sent as an
// Authorization header, never in a URL. Cell output is put into the page as text
// only; HTML outputs go into sandboxed srcdoc iframes without allow-same-origin, and
// images are shown only through <img>, SVG drawn into a PNG first: active content
// (SVG, HTML) never gets a URL of this origin, where opening it in a tab of its own
// would run its script with the page's powers. A strict Content-Security-Policy
// (see [ContentSecurityPolicy]) keeps every script and style to this origin's files.
package dashboard

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// AssetPrefix is the path under which the page's scripts, styles and icons are
// served; a server mounting the dashboard routes "/" (exactly) and this prefix to it.
const AssetPrefix = "/ui/"

// ContentSecurityPolicy is sent with the page and its assets. Scripts, styles and
// connections are this origin's only (no inline script or style, no eval); images
// may also come from blob: and data: URLs, which is how the page shows images it
// fetched with the token and the images in cell outputs. HTML outputs are srcdoc
// iframes, which inherit this policy, so their scripts cannot run either. Nothing
// may frame the page, and forms cannot submit anywhere (the login form is handled
// by script, so the token can never end up in a URL).
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' blob: data:; connect-src 'self'; frame-src 'self'; child-src 'self'; " +
	"font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'"

//go:embed static page.html
var files embed.FS

// Options configures the handler. The zero value works.
type Options struct {
	// Title is the page's title and heading. Defaults to "kernelbox".
	Title string

	// Logger receives one debug line per request (method and path, never a
	// header). Defaults to discarding them.
	Logger *slog.Logger
}

type handler struct {
	page   []byte
	static http.Handler
	log    *slog.Logger
}

// New returns the dashboard's handler. It serves GET and HEAD of "/" (the page) and
// of files under [AssetPrefix]; anything else is 404 (or 405 for other methods). It
// is safe for concurrent use.
func New(o Options) http.Handler {
	if o.Title == "" {
		o.Title = "kernelbox"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	static, err := fs.Sub(files, "static")
	if err != nil {
		panic(fmt.Sprintf("dashboard: embedded assets: %v", err)) // cannot happen: static is embedded
	}
	return &handler{
		page:   renderPage(o.Title),
		static: http.StripPrefix(AssetPrefix, http.FileServerFS(static)),
		log:    o.Logger,
	}
}

// renderPage renders the page shell once: it depends on the options only.
func renderPage(title string) []byte {
	t := template.Must(template.ParseFS(files, "page.html"))
	var b bytes.Buffer
	if err := t.Execute(&b, struct{ Title, Assets string }{title, AssetPrefix}); err != nil {
		panic(fmt.Sprintf("dashboard: render page: %v", err)) // cannot happen: fixed template and data
	}
	return b.Bytes()
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() {
		h.log.Debug("dashboard", "method", r.Method, "path", r.URL.Path, "duration", time.Since(start))
	}()
	securityHeaders(w.Header())
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch {
	case r.URL.Path == "/":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(h.page)
		}
	case strings.HasPrefix(r.URL.Path, AssetPrefix) && !strings.HasSuffix(r.URL.Path, "/"):
		// Revalidate every time: the files change with the binary, and they are small.
		w.Header().Set("Cache-Control", "no-cache")
		h.static.ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}

// securityHeaders sets the headers every answer of the dashboard carries.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}
