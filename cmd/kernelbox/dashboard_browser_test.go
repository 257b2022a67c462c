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

	"github.com/kernelbox/kernelbox/internal/testenv"
)

// browser is one headless Chromium tab driving the dashboard.
type browser struct {
	t   testing.TB
	ctx context.Context

	mu       sync.Mutex
	problems []string // uncaught exceptions and CSP violations the page reported
}

// newBrowser starts Debian's Chromium headless for the length of the test.
func newBrowser(t testing.TB) *browser {
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
