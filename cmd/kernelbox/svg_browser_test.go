package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// hostileSVG draws a picture and, if it is ever rendered as a document rather than
// as an image, runs a script that marks its window and, when it has a real origin,
// that origin's localStorage (which the dashboard tab can read back).
const hostileSVG = `<svg xmlns="http://www.w3.org/2000/svg" width="160" height="90" viewBox="0 0 160 90">` +
	`<rect width="160" height="90" fill="#2a7"/><circle cx="80" cy="45" r="30" fill="#fff"/>` +
	`<script>window.kbSVGRan = String(location.origin); ` +
	`try { localStorage.setItem("kb-svg-ran", location.href) } catch (e) {}</script></svg>`

// svgCode shows hostileSVG as cell output (raw image/svg+xml, IPython's SVG, as
// text/html, and disguised as image/png) and writes it as artifacts: chart.svg, an
// HTML page embedding it, and disguised as evil.png. (A JSON string literal is a
// Python one too.)
var svgCode = `import base64
from IPython.display import SVG, display
svg = ` + js(hostileSVG) + `
display({"image/svg+xml": svg}, raw=True)
display(SVG(svg))
display({"text/html": svg}, raw=True)
display({"image/png": base64.b64encode(svg.encode()).decode()}, raw=True)
with open("outputs/chart.svg", "w") as f:
    f.write(svg)
with open("outputs/page.html", "w") as f:
    f.write("<!doctype html><title>artifact</title>" + svg)
with open("outputs/evil.png", "w") as f:
    f.write(svg)
print("drawn")`

// recordObjectURLs runs before the page's own scripts: it records the type of every
// Blob the page turns into a blob: URL, and keeps every such URL alive (the page
// revokes them after a while) so that the test can open each one, as a person
// choosing "Open image in new tab" or opening a download link could.
const recordObjectURLs = `(() => {
  if (window.top !== window) return;
  const made = [];
  window.kbObjectURLs = made;
  const create = URL.createObjectURL.bind(URL);
  URL.createObjectURL = (obj) => {
    const u = create(obj);
    made.push({ url: u, type: (obj && obj.type) || "" });
    return u;
  };
  URL.revokeObjectURL = () => {};
})();`

// objectURL is one blob: URL the page made.
type objectURL struct {
	URL  string `json:"url"`
	Type string `json:"type"`
}

// opened is what a new tab showed for one URL.
type opened struct {
	Ran    string `json:"ran"`    // the origin the SVG's script saw, "" if it never ran
	Origin string `json:"origin"` // the tab's document origin
	Type   string `json:"type"`   // the tab's document content type
}

// TestDashboardSVGNotInOrigin is issue 20 item 3: a kernel's SVG (cell output and
// artifact) must never be handed to the browser under a URL of kernelbox's origin
// where it renders as a document, because then its script runs with the dashboard's
// origin (and, on a tokenless server, the API). A real session displays an SVG with a
// <script> (also disguised as a PNG) and writes it as outputs/chart.svg (and as an
// HTML page, and disguised as evil.png); the test views and downloads the
// artifacts, then opens every image source, every link and every blob: URL the page
// made, and the artifact routes themselves, each in a new tab, and sees the script
// run nowhere. No Blob the page turns into a URL may carry an active type.
func TestDashboardSVGNotInOrigin(t *testing.T) {
	b := newBrowser(t)
	s := startServe(t)
	const session = "svg-demo"

	b.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument,
			page.AddScriptToEvaluateOnNewDocumentParams{Source: recordObjectURLs})
		return err
	}))
	b.do(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		// Downloads are refused: the test wants to see what would render, not files.
		_, err := cdp.Call(ctx, chromedp.FromContext(ctx).Browser, cdpbrowser.SetDownloadBehavior,
			cdpbrowser.SetDownloadBehaviorParams{Behavior: cdpbrowser.SetDownloadBehaviorBehaviorDeny})
		return err
	}))
	b.do(chromedp.Navigate(s.URL + "/"))
	b.waitFor("the login form", `!document.getElementById("login").hidden`, 20*time.Second)
	b.do(chromedp.SendKeys(chromedp.ID("token"), s.Token), chromedp.Click(chromedp.CSS("#login-form button")))
	b.waitFor("the dashboard", `!document.getElementById("main").hidden`, 20*time.Second)

	id := s.detach(t, session, svgCode)
	row := `document.querySelector('tr[data-session="` + session + `"]')`
	b.waitFor("the session's row", row, 60*time.Second)
	b.do(chromedp.Click(chromedp.CSS(`tr[data-session="` + session + `"]`)))
	call := callSel(id)
	b.waitFor("the call to finish", call+`?.dataset.status === "ok"`, 90*time.Second)
	b.waitFor("both SVG outputs shown", `[...`+call+`.querySelectorAll("img.out-image")].filter((i) => i.naturalWidth > 0).length === 2`, 20*time.Second)
	require.Contains(t, eval[string](b, call+`.querySelector(".outputs").innerText`), "drawn")

	// View the SVG artifact and the disguised one, then download all three.
	names := []string{"chart.svg", "page.html", "evil.png"}
	for _, name := range names {
		b.waitFor("the artifact "+name, `document.querySelector('li.artifact[data-name="`+name+`"]')`, 30*time.Second)
	}
	before := eval[int](b, `window.kbObjectURLs.length`)
	b.do(chromedp.Click(chromedp.CSS(`li.artifact[data-name="evil.png"] button.view`)))
	b.waitFor("the disguised artifact's preview", fmt.Sprintf("window.kbObjectURLs.length > %d", before), 20*time.Second)
	b.do(chromedp.Click(chromedp.CSS(`li.artifact[data-name="chart.svg"] button.view`)))
	b.waitFor("the SVG artifact's preview", `document.getElementById("preview-img").naturalWidth > 0`, 20*time.Second)
	for _, name := range names {
		before := eval[int](b, `window.kbObjectURLs.length`)
		b.do(chromedp.Click(chromedp.CSS(`li.artifact[data-name="` + name + `"] button.download`)))
		b.waitFor("the download of "+name, fmt.Sprintf("window.kbObjectURLs.length > %d", before), 20*time.Second)
	}

	// Everything the page offers to open: image sources, links, frame sources, every
	// blob: URL it made; and the artifact routes, opened with the token.
	var urls []string
	require.NoError(t, json.Unmarshal([]byte(eval[string](b, `JSON.stringify([
		...[...document.querySelectorAll("img[src]")].map((e) => e.src),
		...[...document.querySelectorAll("a[href]")].map((e) => e.href),
		...[...document.querySelectorAll("iframe[src], object[data], embed[src]")].map((e) => e.src || e.data),
		...window.kbObjectURLs.map((o) => o.url),
	])`)), &urls))
	var made []objectURL
	require.NoError(t, json.Unmarshal([]byte(eval[string](b, `JSON.stringify(window.kbObjectURLs)`)), &made))
	var routes []string
	for _, name := range names {
		routes = append(routes, s.URL+"/v1/artifacts/"+session+"/"+name)
	}
	for _, r := range routes {
		// The route itself is a download that, if rendered anyway, runs and loads nothing.
		req, err := http.NewRequest(http.MethodGet, r, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+s.Token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, r)
		require.Equal(t, "sandbox; default-src 'none'", resp.Header.Get("Content-Security-Policy"), r)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), r)
		require.True(t, strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment"), r)
	}
	seen := map[string]bool{}
	var ran []string
	for _, u := range append(urls, routes...) {
		if seen[u] || strings.HasPrefix(u, s.URL+"/ui/") {
			continue // the dashboard's own files (its icon) are not kernel content
		}
		seen[u] = true
		got := openInNewTab(t, b, u, strings.HasPrefix(u, s.URL+"/v1/"), s.Token)
		short := u
		if len(short) > 80 {
			short = short[:80] + "…"
		}
		t.Logf("opened %s: document %q of origin %q, SVG script ran in %q", short, got.Type, got.Origin, got.Ran)
		if got.Ran != "" {
			ran = append(ran, short+" (ran in "+got.Ran+")")
		}
	}
	require.NotEmpty(t, seen, "the page offered nothing to open")
	require.Empty(t, ran, "an SVG's script ran when a URL the page offers was opened in a tab")
	require.Equal(t, "", eval[string](b, `localStorage.getItem("kb-svg-ran") || ""`),
		"an SVG's script wrote to kernelbox's origin's storage")

	// No Blob turned into a URL may be active content: raster images, or a download
	// typed application/octet-stream.
	passive := regexp.MustCompile(`^(image/(png|jpeg|gif|webp)|application/octet-stream)$`)
	var active []string
	for _, o := range made {
		t.Logf("URL.createObjectURL with type %q", o.Type)
		if !passive.MatchString(o.Type) {
			active = append(active, o.Type)
		}
	}
	require.Empty(t, active, "the page made blob: URLs of active types")
	b.checkClean()
}

// openInNewTab opens u in a new tab of b's browser (with the bearer token when
// withToken) and reports whether hostileSVG's script ran there. A navigation that
// ends in a refused download leaves the tab blank, which is what a safe URL does.
func openInNewTab(t testing.TB, b *browser, u string, withToken bool, token string) opened {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	defer cancel()
	tctx, cancelT := context.WithTimeout(ctx, 30*time.Second)
	defer cancelT()
	steps := []chromedp.Action[chromedp.Void]{}
	if withToken {
		steps = append(steps, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
				return err
			}
			_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders,
				network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + token}})
			return err
		}))
	}
	require.NoError(t, chromedp.Do(tctx, steps...))
	if err := chromedp.Do(tctx, chromedp.Navigate(u)); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		// A download (refused) aborts the navigation; the tab stays on about:blank.
		t.Logf("navigating to %s: %v", redact(u), err)
	}
	// Give a script that did load a moment to run.
	require.NoError(t, chromedp.Do(tctx, chromedp.Sleep(300*time.Millisecond)))
	out, err := chromedp.Run(tctx, chromedp.Evaluate[string](`JSON.stringify({
		ran: window.kbSVGRan || "", origin: String(location.origin), type: document.contentType || ""})`))
	require.NoError(t, err, "reading the tab of %s", redact(u))
	var o opened
	require.NoError(t, json.Unmarshal([]byte(out), &o))
	return o
}

// redact shortens a URL for a message (data: URLs are long).
func redact(u string) string {
	if p, err := url.Parse(u); err == nil && p.Scheme == "data" && len(u) > 60 {
		return u[:60] + "…"
	}
	return u
}
