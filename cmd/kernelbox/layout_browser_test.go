package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// layoutOverflow is a script that lists what sticks out of its card: every
// cell of the sessions table whose right edge passes the sessions card's
// content box, and the page itself when it scrolls sideways.
const layoutOverflow = `(() => {
  const out = [];
  const card = document.querySelector("section.sessions");
  const cs = getComputedStyle(card);
  const right = card.getBoundingClientRect().right - parseFloat(cs.paddingRight) - parseFloat(cs.borderRightWidth) + 0.5;
  for (const c of card.querySelectorAll("th, td")) {
    const r = c.getBoundingClientRect();
    if (r.right > right) {
      out.push(c.tagName + " " + JSON.stringify(c.textContent.slice(0, 40)) + " ends at " + Math.round(r.right) + " > " + Math.round(right));
    }
  }
  if (card.scrollWidth > card.clientWidth + 0.5) {
    out.push("the card scrolls: " + card.scrollWidth + " > " + card.clientWidth);
  }
  if (document.documentElement.scrollWidth > innerWidth + 0.5) {
    out.push("the page scrolls sideways: " + document.documentElement.scrollWidth + " > " + innerWidth);
  }
  return out.join("\n");
})()`

// TestDashboardLayoutWidths is issue 47 item 8: the sessions table stays inside
// its card at common window widths, 1400 px among them (where the "Last
// activity" column ran over the card), with the ids, templates, states and
// counts a busy server shows. The page's own width is checked too. About 10 s.
func TestDashboardLayoutWidths(t *testing.T) {
	b := newBrowser(t)
	tmpl := filepath.Join(t.TempDir(), "templates.json")
	require.NoError(t, os.WriteFile(tmpl, []byte(`{"templates": [{"name": "analysis-large"}]}`), 0o600))
	s := startServeWith(t, serveOpts{token: "test-token-123", args: []string{"--templates", tmpl}})
	ids := []string{
		"quarterly-revenue-forecast-analysis-2026-q3",
		"s1",
		"data_cleaning_pipeline_stage_07_retry",
		strings.Repeat("x", 64),
	}
	for i, id := range ids {
		body := fmt.Sprintf(`{"template": "analysis-large", "code": "x = %d", "detach": true}`, i)
		require.Equal(t, 202, s.post(t, "/v1/sessions/"+id+"/execute", body, nil))
	}
	b.do(chromedp.Navigate(s.URL + "/"))
	b.waitFor("the login form", `!document.getElementById("login").hidden`, 20*time.Second)
	b.do(chromedp.SendKeys(chromedp.ID("token"), s.Token), chromedp.Click(chromedp.CSS("#login-form button")))
	b.waitFor("every session's row", fmt.Sprintf(`document.querySelectorAll("#sessions-body tr").length === %d`, len(ids)), 90*time.Second)
	b.waitFor("the sessions idle", `[...document.querySelectorAll("#sessions-body .badge")].every(e => e.textContent === "idle")`, 90*time.Second)
	b.do(chromedp.Click(chromedp.CSS(`#sessions-body tr`)))
	shots := os.Getenv("KERNELBOX_DASHBOARD_SCREENSHOTS")
	var bad []string
	for _, w := range []int64{1920, 1600, 1440, 1400, 1366, 1280, 1024, 901, 800, 390} {
		b.do(chromedp.EmulateViewport(w, 900))
		time.Sleep(100 * time.Millisecond) // a layout pass
		if got := eval[string](b, layoutOverflow); got != "" {
			bad = append(bad, fmt.Sprintf("at %d px:\n%s", w, got))
		}
		b.screenshot(shots, fmt.Sprintf("dashboard-layout-%d.png", w))
	}
	require.Empty(t, bad, "the sessions table overflows its card")
	b.checkClean()
}
