package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestDashboardFragmentLogin: `kernelbox dashboard`, run by the user whose
// tokenless `kernelbox serve` is up, prints the dashboard's URL with the token in
// its fragment; opening it in Chromium logs in (the token lands in the tab's
// sessionStorage, as a pasted one does) and the fragment is gone from the address
// bar at once. A wrong #token shows the refusal and is not kept; a #token set on an
// already open page (no reload) logs in too. Serve's own output never holds the token.
func TestDashboardFragmentLogin(t *testing.T) {
	b := newBrowser(t)
	rt := t.TempDir()
	s := startServeWith(t, serveOpts{runtimeDir: rt})
	require.NotEmpty(t, s.Token)

	out, code := cli(t, kernelboxBin(t), []string{"HOME=" + os.Getenv("HOME"), "XDG_RUNTIME_DIR=" + rt}, "",
		"dashboard", "--server", s.URL)
	require.Equal(t, 0, code, "kernelbox dashboard: %s", out)
	link := strings.TrimSpace(out)
	require.Equal(t, s.URL+"/#token="+s.Token, link)

	// A wrong token in the fragment is refused, not kept, and its fragment removed.
	b.do(chromedp.Navigate(s.URL + "/#token=not-the-token"))
	b.waitFor("the refusal", `document.getElementById("login-error").textContent.includes("Wrong token")`, 20*time.Second)
	require.Equal(t, "", eval[string](b, `sessionStorage.getItem("kernelbox.token") || ""`))
	require.Equal(t, s.URL+"/", eval[string](b, `location.href`))

	// The printed link logs in, and the token does not stay in the URL.
	b.do(chromedp.Navigate(link))
	b.waitFor("the dashboard", `!document.getElementById("main").hidden`, 20*time.Second)
	require.Equal(t, s.Token, eval[string](b, `sessionStorage.getItem("kernelbox.token")`))
	require.Equal(t, s.URL+"/", eval[string](b, `location.href`))
	require.Equal(t, "", eval[string](b, `location.hash`))
	b.waitFor("the connection to show", `document.getElementById("conn").textContent !== "connecting…"`, 20*time.Second)
	require.True(t, eval[bool](b, `document.getElementById("login").hidden`))

	// Log out, then hand the token over on the open page: no reload, still logs in.
	b.do(chromedp.Click(chromedp.ID("logout")))
	b.waitFor("the login form", `!document.getElementById("login").hidden`, 20*time.Second)
	b.do(chromedp.Evaluate[chromedp.Void](`location.hash = "token=` + s.Token + `"`))
	b.waitFor("the dashboard again", `!document.getElementById("main").hidden`, 20*time.Second)
	require.Equal(t, s.URL+"/", eval[string](b, `location.href`))
	require.Equal(t, s.Token, eval[string](b, `sessionStorage.getItem("kernelbox.token")`))

	require.NotContains(t, s.log.String(), s.Token, "serve printed the token")
	require.Contains(t, s.log.String(), "kernelbox dashboard", "serve does not say how to get a login link")
	b.checkClean()
}
