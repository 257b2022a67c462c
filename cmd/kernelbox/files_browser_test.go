package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/client"
)

// hostileName is a file name that is markup: the page must show it as text.
const hostileName = `<img src=x onerror="window.kbNameRan=1">.txt`

// TestDashboardFiles drives the dashboard's files view in headless Chromium
// against `kernelbox serve` on local and on remote (files through the kernel):
// the session's directory is listed (a directory opens, Up goes back), a file
// downloads byte for byte (saved to disk by the browser, same SHA-256), a name
// that is markup is shown as text, a symbolic link and a FIFO the kernel
// planted are listed with no download, and active content the session holds
// (HTML and SVG with scripts) is only ever saved: every blob: URL the page
// makes is application/octet-stream, and neither those URLs nor the files
// routes opened in a tab run the scripts.
func TestDashboardFiles(t *testing.T) {
	for _, backend := range []string{"local", "remote"} {
		t.Run(backend, func(t *testing.T) {
			var s *server
			if backend == "local" {
				s = startServe(t)
			} else {
				s, _ = startServeRemote(t)
			}
			dashboardFiles(t, s)
		})
	}
}

func dashboardFiles(t *testing.T, s *server) {
	b := newBrowser(t)
	downloads := t.TempDir()
	const session = "files-view"

	b.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument,
			page.AddScriptToEvaluateOnNewDocumentParams{Source: recordObjectURLs})
		return err
	}))
	b.do(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := cdp.Call(ctx, chromedp.FromContext(ctx).Browser, cdpbrowser.SetDownloadBehavior,
			cdpbrowser.SetDownloadBehaviorParams{Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads})
		return err
	}))

	c, err := client.New(s.URL, &client.Options{Token: s.Token})
	require.NoError(t, err)
	ctx := context.Background()
	blob := make([]byte, 300<<10+3)
	_, _ = rand.Read(blob)
	for name, content := range map[string]string{
		"data/sub/blob.bin":   string(blob),
		"data/" + hostileName: "markup",
		"data/page.html":      "<!doctype html><title>file</title>" + hostileSVG,
		"data/chart.svg":      hostileSVG,
	} {
		_, err := c.Upload(ctx, session, name, strings.NewReader(content), nil)
		require.NoError(t, err, name)
	}
	body, err := json.Marshal(map[string]any{"code": `import os
os.symlink("/etc/passwd", "data/link")
os.mkfifo("data/fifo")`})
	require.NoError(t, err)
	var res struct {
		Status string `json:"status"`
	}
	require.Equal(t, http.StatusOK, s.post(t, "/v1/sessions/"+session+"/execute", string(body), &res))
	require.Equal(t, "ok", res.Status)

	b.do(chromedp.Navigate(s.URL + "/"))
	b.waitFor("the login form", `!document.getElementById("login").hidden`, 20*time.Second)
	b.do(chromedp.SendKeys(chromedp.ID("token"), s.Token), chromedp.Click(chromedp.CSS("#login-form button")))
	b.waitFor("the dashboard", `!document.getElementById("main").hidden`, 20*time.Second)
	b.waitFor("the session's row", `document.querySelector('tr[data-session="`+session+`"]')`, 60*time.Second)
	b.do(chromedp.Click(chromedp.CSS(`tr[data-session="` + session + `"]`)))

	entry := func(name string) string {
		return fmt.Sprintf(`[...document.querySelectorAll("#files li.file")].find((li) => li.dataset.name === %s)`, js(name))
	}
	b.waitFor("the data directory", entry("data")+`?.dataset.type === "dir"`, 60*time.Second)
	b.do(chromedp.Click(chromedp.CSS(`#files li.file[data-name="data"] button.fname`)))
	b.waitFor("the data directory's list", entry("chart.svg"), 30*time.Second)
	require.Equal(t, "/data", eval[string](b, `document.getElementById("files-path").textContent`))
	require.Equal(t, "symlink", eval[string](b, entry("link")+`.dataset.type`))
	require.Equal(t, "other", eval[string](b, entry("fifo")+`.dataset.type`))
	for _, name := range []string{"link", "fifo", "sub"} {
		require.False(t, eval[bool](b, `!!`+entry(name)+`.querySelector("button.download")`), "%s offers a download", name)
	}
	require.True(t, eval[bool](b, `!!`+entry(hostileName)), "the markup name is listed")
	require.Equal(t, hostileName, eval[string](b, entry(hostileName)+`.querySelector(".fname").textContent`))
	require.False(t, eval[bool](b, `document.querySelector("#files img") !== null`), "a file name became markup")
	require.False(t, eval[bool](b, `window.kbNameRan === 1`), "a file name's script ran")

	// A directory opens; a file downloads to disk byte for byte; Up goes back.
	b.do(chromedp.Click(chromedp.CSS(`#files li.file[data-name="sub"] button.fname`)))
	b.waitFor("the sub directory's list", entry("blob.bin"), 30*time.Second)
	b.do(chromedp.Click(chromedp.CSS(`#files li.file[data-name="blob.bin"] button.download`)))
	saved := filepath.Join(downloads, "blob.bin")
	require.Eventually(t, func() bool {
		fi, err := os.Stat(saved)
		return err == nil && fi.Size() == int64(len(blob))
	}, 30*time.Second, 100*time.Millisecond, "the browser saved no blob.bin")
	got, err := os.ReadFile(saved)
	require.NoError(t, err)
	want := sha256.Sum256(blob)
	gotSum := sha256.Sum256(got)
	require.Equal(t, hex.EncodeToString(want[:]), hex.EncodeToString(gotSum[:]), "the download is the file")
	b.do(chromedp.Click(chromedp.ID("files-up")))
	b.waitFor("back in data", entry("chart.svg"), 30*time.Second)

	// Active content is saved, never rendered.
	for _, name := range []string{"page.html", "chart.svg"} {
		before := eval[int](b, `window.kbObjectURLs.length`)
		b.do(chromedp.Click(chromedp.CSS(`#files li.file[data-name="` + name + `"] button.download`)))
		b.waitFor("the download of "+name, fmt.Sprintf("window.kbObjectURLs.length > %d", before), 30*time.Second)
	}
	var made []objectURL
	require.NoError(t, json.Unmarshal([]byte(eval[string](b, `JSON.stringify(window.kbObjectURLs)`)), &made))
	passive := regexp.MustCompile(`^application/octet-stream$`)
	var urls []string
	for _, o := range made {
		require.Regexp(t, passive, o.Type, "the files view made a blob: URL of an active type")
		urls = append(urls, o.URL)
	}
	for _, name := range []string{"page.html", "chart.svg"} {
		u := s.URL + "/v1/sessions/" + session + "/files/data/" + name
		req, err := http.NewRequest(http.MethodGet, u, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+s.Token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, u)
		require.Equal(t, "attachment; filename="+name, resp.Header.Get("Content-Disposition"), u)
		require.Equal(t, "sandbox; default-src 'none'", resp.Header.Get("Content-Security-Policy"), u)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), u)
		urls = append(urls, u)
	}
	for _, u := range urls {
		got := openInNewTab(t, b, u, strings.HasPrefix(u, s.URL+"/v1/"), s.Token)
		t.Logf("opened %s: document %q of origin %q, SVG script ran in %q", redact(u), got.Type, got.Origin, got.Ran)
		require.Empty(t, got.Ran, "a session file's script ran when %s was opened in a tab", u)
	}
	require.Equal(t, "", eval[string](b, `localStorage.getItem("kb-svg-ran") || ""`),
		"a session file's script wrote to kernelbox's origin's storage")
	b.checkClean()
}
