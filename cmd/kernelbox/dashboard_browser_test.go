package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// browser is one headless Chromium tab driving the dashboard.
type browser struct {
	t   testing.TB
	ctx context.Context

	mu       sync.Mutex
	problems []string // uncaught exceptions and CSP violations the page reported
}

// newBrowser starts Debian's Chromium headless for the length of the test, with
// extra options (flags) if given.
func newBrowser(t testing.TB, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	path := testenv.Browser(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("hide-scrollbars", true),
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to start its sandbox as root, and CI runs as root; the
		// browser only ever loads the test's own loopback server.
		opts = append(opts, chromedp.NoSandbox)
	}
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	b := &browser{t: t, ctx: ctx}
	require.NoError(t, chromedp.Listen(ctx, b.listen))
	return b
}

// listen records what the page reports that a test must not see: an uncaught
// exception, or a resource the Content-Security-Policy refused.
func (b *browser) listen(ev any) {
	var problem string
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		problem = "exception: " + e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			problem += " " + e.ExceptionDetails.Exception.Description
		}
	case *log.EventEntryAdded:
		if strings.Contains(e.Entry.Text, "Content Security Policy") {
			problem = "CSP: " + e.Entry.Text
		}
	case *runtime.EventConsoleAPICalled:
		for _, a := range e.Args {
			if strings.Contains(string(a.Value), "Content Security Policy") {
				problem = "CSP: " + string(a.Value)
			}
		}
	}
	if problem != "" {
		b.mu.Lock()
		b.problems = append(b.problems, problem)
		b.mu.Unlock()
	}
}

// do runs actions, failing the test on error.
func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, actions...))
}

// eval evaluates a JavaScript expression and decodes its value into T.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(b.t, err, "evaluate %s", expr)
	return v
}

// waitFor polls a JavaScript condition until it holds, failing with the page's text
// (and what was asked) when it does not within d.
func (b *browser) waitFor(what, cond string, d time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string]("document.body.innerText"))
			b.t.Fatalf("waited %v for %s (%s; last error %v); the page shows:\n%s", d, what, cond, err, text)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// screenshot saves the viewport as dir/name when dir is set (see
// KERNELBOX_DASHBOARD_SCREENSHOTS).
func (b *browser) screenshot(dir, name string) {
	b.t.Helper()
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(b.t, err)
	require.NoError(b.t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
}

// checkClean fails the test if the page threw or the CSP refused anything.
func (b *browser) checkClean() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Empty(b.t, b.problems, "the page reported problems")
}

// post sends a JSON body with the server's token and decodes the answer into out.
func (s *server) post(t testing.TB, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil {
		require.NoError(t, json.Unmarshal(b, out), "%s", b)
	}
	return resp.StatusCode
}

// detach starts code on session as a detached call and returns its id.
func (s *server) detach(t testing.TB, session, code string) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"code": code, "detach": true})
	require.NoError(t, err)
	var out struct {
		CallID string `json:"call_id"`
	}
	require.Equal(t, http.StatusAccepted, s.post(t, "/v1/sessions/"+session+"/execute", string(body), &out))
	require.NotEmpty(t, out.CallID)
	return out.CallID
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func callSel(id string) string {
	return fmt.Sprintf(`document.querySelector('li[data-call=%s]')`, js(id))
}

// plotCode saves a PNG artifact and shows it inline, prints, and shows sandboxed
// HTML whose script must never run.
const plotCode = `import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from IPython.display import HTML, Image, display
fig, ax = plt.subplots(figsize=(4, 3))
ax.plot([1, 4, 2, 5], marker="o")
ax.set_title("browser test")
fig.savefig("outputs/plot.png", dpi=80)
plt.close(fig)
display(Image(filename="outputs/plot.png"))
display(HTML("<b id='cell-html'>bold from a cell</b><script>parent.document.title = 'pwned'</script>"))
x = 41
print("plotted")`

// tickCode prints a line every 0.2 s for a minute, long enough to be watched and
// interrupted.
const tickCode = `import time
for i in range(300):
    print("tick", i, flush=True)
    time.sleep(0.2)`

// TestDashboardBrowser drives the dashboard in headless Chromium against a real
// `kernelbox serve --token` with the local backend: a wrong token is refused, the
// right one logs in (kept in sessionStorage, never in the URL), a session started
// through the API appears, a finished call shows its image, HTML (sandboxed, its
// script not run) and text, a running call's output arrives live, the Interrupt
// button stops it and the session keeps its state, Hibernate and Resume keep it
// too (the snapshot's size and names shown between them), the image artifact opens, and
// Close ends the session. The page must throw nothing and break no CSP rule.
//
// KERNELBOX_DASHBOARD_SCREENSHOTS=dir saves screenshots there (docs/img uses them).
func TestDashboardBrowser(t *testing.T) {
	b := newBrowser(t)
	s := startServe(t)
	shots := os.Getenv("KERNELBOX_DASHBOARD_SCREENSHOTS")
	const session = "browser-demo"

	b.do(chromedp.Navigate(s.URL + "/"))
	b.waitFor("the login form", `!document.getElementById("login").hidden`, 20*time.Second)
	b.screenshot(shots, "dashboard-login.png")

	// A wrong token is refused and not kept.
	b.do(chromedp.SendKeys(chromedp.ID("token"), "not-the-token"), chromedp.Click(chromedp.CSS("#login-form button")))
	b.waitFor("the refusal", `document.getElementById("login-error").textContent.includes("Wrong token")`, 20*time.Second)
	require.True(t, eval[bool](b, `document.getElementById("main").hidden`))
	require.Equal(t, "", eval[string](b, `sessionStorage.getItem("kernelbox.token") || ""`))

	// The right one logs in; it lives in the tab's sessionStorage, not in the URL.
	b.do(chromedp.SendKeys(chromedp.ID("token"), s.Token), chromedp.Click(chromedp.CSS("#login-form button")))
	b.waitFor("the dashboard", `!document.getElementById("main").hidden`, 20*time.Second)
	require.Equal(t, s.Token, eval[string](b, `sessionStorage.getItem("kernelbox.token")`))
	require.NotContains(t, eval[string](b, `location.href`), s.Token)

	// A session started through the API appears in the table.
	first := s.detach(t, session, plotCode)
	row := `document.querySelector('tr[data-session="` + session + `"]')`
	b.waitFor("the session's row", row, 60*time.Second)
	b.do(chromedp.Click(chromedp.CSS(`tr[data-session="` + session + `"]`)))
	b.waitFor("the first call to finish", callSel(first)+`?.dataset.status === "ok"`, 90*time.Second)
	call := callSel(first)
	b.waitFor("its inline image", call+`.querySelector("img.out-image")?.naturalWidth > 0`, 20*time.Second)
	require.Contains(t, eval[string](b, call+`.querySelector(".outputs").innerText`), "plotted")
	require.Equal(t, "", eval[string](b, call+`.querySelector("iframe.out-html").getAttribute("sandbox")`),
		"cell HTML must be in a sandboxed iframe with no allowances")
	require.NotEqual(t, "pwned", eval[string](b, `document.title`), "a cell's script ran in the page")
	b.waitFor("the session to show idle", row+`.querySelector(".badge").textContent === "idle"`, 20*time.Second)
	b.screenshot(shots, "dashboard-outputs.png")

	// A running call's output arrives while it runs.
	second := s.detach(t, session, tickCode)
	call = callSel(second)
	b.waitFor("the running call", call, 20*time.Second)
	b.waitFor("live output", call+`.querySelector(".outputs").innerText.includes("tick 5")`, 60*time.Second)
	require.Equal(t, "running", eval[string](b, call+`.dataset.state`), "output arrived only after the call ended")
	b.screenshot(shots, "dashboard-live.png")

	// The Interrupt button stops it; the session keeps its state.
	b.do(chromedp.Click(chromedp.ID("btn-interrupt")))
	b.waitFor("the interrupted call", call+`.dataset.status === "interrupted"`, 60*time.Second)
	third := s.detach(t, session, "print(x + 1)")
	b.waitFor("the state to survive", callSel(third)+`?.querySelector(".outputs").innerText.includes("42")`, 60*time.Second)

	// Hibernate saves its variables and stops its kernel, the detail says what the
	// snapshot holds, and Resume brings them back.
	b.waitFor("the session to be idle", row+`.querySelector(".badge").textContent === "idle"`, 30*time.Second)
	b.waitFor("the Hibernate button", `!document.getElementById("btn-hibernate").hidden`, 10*time.Second)
	require.True(t, eval[bool](b, `document.getElementById("btn-resume").hidden`))
	b.do(chromedp.Click(chromedp.ID("btn-hibernate")))
	b.waitFor("the hibernated badge", row+`.querySelector(".badge").textContent === "hibernated"`, 60*time.Second)
	durable := `document.getElementById("durable").textContent`
	b.waitFor("the snapshot's description", durable+`.includes("Hibernated: snapshot")`, 20*time.Second)
	require.Regexp(t, `Hibernated: snapshot [0-9.]+ (B|KiB|MiB), [0-9]+ names`, eval[string](b, durable))
	require.True(t, eval[bool](b, `document.getElementById("btn-hibernate").hidden`))
	b.screenshot(shots, "dashboard-hibernated.png")
	b.do(chromedp.Click(chromedp.ID("btn-resume")))
	b.waitFor("the resumed session", row+`.querySelector(".badge").textContent === "idle"`, 60*time.Second)
	require.False(t, eval[bool](b, `document.getElementById("durable").textContent.includes("Hibernated")`))
	fourth := s.detach(t, session, "print(x + 2)")
	b.waitFor("the restored state", callSel(fourth)+`?.querySelector(".outputs").innerText.includes("43")`, 60*time.Second)

	// The image artifact is listed and opens (fetched with the token, shown as a blob: URL).
	art := `document.querySelector('li.artifact[data-name="plot.png"]')`
	b.waitFor("the artifact", art, 30*time.Second)
	b.do(chromedp.Click(chromedp.CSS(`li.artifact[data-name="plot.png"] button.view`)))
	b.waitFor("the artifact preview", `document.getElementById("preview-img").naturalWidth > 0`, 20*time.Second)
	require.True(t, eval[bool](b, `document.getElementById("preview-img").src.startsWith("blob:")`))
	b.screenshot(shots, "dashboard-artifact.png")

	// Close asks for a second click, then ends the session.
	b.do(chromedp.Click(chromedp.ID("btn-close")))
	require.Equal(t, "Close: sure?", eval[string](b, `document.getElementById("btn-close").textContent`))
	b.do(chromedp.Click(chromedp.ID("btn-close")))
	b.waitFor("the session to close", `!`+row, 30*time.Second)
	code, _ := s.get(t, "/v1/sessions/"+session, true)
	require.Equal(t, http.StatusNotFound, code)

	b.checkClean()
}
