package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/client"
)

// rebindHost is the attacker's name. Chromium resolves it to 127.0.0.1, as a DNS
// rebinding attack makes it do after the attacker's own server has handed the
// page out under that name.
const rebindHost = "rebind.attacker.example"

// rebindAttack is the attacker page's script: from the origin
// http://rebind.attacker.example:PORT, which now resolves to kernelbox's listener,
// every request is same-origin, so neither CORS nor a cross-origin check stops
// it. It reads the dashboard, the sessions, the metrics, speaks MCP and runs code
// that writes marker (a JSON string), and returns what each request got.
const rebindAttack = `(async (marker) => {
  const out = [];
  const send = async (method, path, body) => {
    const init = { method, headers: {} };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
      init.headers["Accept"] = "application/json, text/event-stream";
    }
    try {
      const r = await fetch(path, init);
      const text = await r.text();
      let code = "";
      try { code = JSON.parse(text).error.code } catch (e) {}
      out.push({ req: method + " " + path, status: r.status, code, body: text.slice(0, 300) });
    } catch (e) {
      out.push({ req: method + " " + path, status: 0, code: "", body: String(e) });
    }
  };
  await send("GET", "/");
  await send("GET", "/v1/sessions");
  await send("GET", "/metrics");
  await send("POST", "/mcp", { jsonrpc: "2.0", id: 1, method: "initialize",
    params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "attacker", version: "1" } } });
  await send("POST", "/v1/sessions/r/execute", { code: "open(" + JSON.stringify(marker) + ", 'w').write('pwned')" });
  await send("GET", "/v1/sessions");
  return JSON.stringify({ origin: location.origin, results: out });
})`

// TestDashboardDNSRebinding is issue 20 item 1 in real Chromium: a quick-start
// `kernelbox serve --backend local` (no --token) on 127.0.0.1:PORT, and a browser
// in which the attacker's name resolves to 127.0.0.1. The page at
// http://rebind.attacker.example:PORT/ is refused (403 forbidden_host), and the
// attacker's script running in that origin gets 403 forbidden_host on the
// dashboard, /v1/sessions, /metrics, /mcp and execute; no session exists
// afterwards (asked with the real client and the token) and the code never ran.
func TestDashboardDNSRebinding(t *testing.T) {
	b := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP "+rebindHost+" 127.0.0.1"))
	rt := t.TempDir()
	s := startServeWith(t, serveOpts{runtimeDir: rt})
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	attacker := "http://" + rebindHost + ":" + u.Port()
	marker := filepath.Join(t.TempDir(), "pwned")

	// The page load itself, under the attacker's name.
	b.do(chromedp.Navigate(attacker + "/"))
	require.Equal(t, attacker, eval[string](b, `location.origin`))
	var page struct {
		Error struct{ Code string } `json:"error"`
	}
	// Every check below is reported (assert, not require): on a server without the
	// guard, the test shows everything the attacker got.
	body := eval[string](b, `document.body.innerText`)
	if assert.NoError(t, json.Unmarshal([]byte(body), &page), "the page at %s/ is not an error: %.300s", attacker, body) {
		assert.Equal(t, "forbidden_host", page.Error.Code, body)
	}

	// The attacker's script, in the attacker's origin.
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](rebindAttack+"("+js(marker)+")", chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	var out struct {
		Origin  string
		Results []struct {
			Req, Code, Body string
			Status          int
		}
	}
	require.NoError(t, json.Unmarshal([]byte(got), &out))
	require.Equal(t, attacker, out.Origin)
	require.Len(t, out.Results, 6)
	for _, r := range out.Results {
		t.Logf("%s from %s: %d %s", r.Req, out.Origin, r.Status, r.Code)
		assert.Equal(t, 403, r.Status, "%s from %s answered: %s", r.Req, out.Origin, r.Body)
		assert.Equal(t, "forbidden_host", r.Code, "%s from %s answered: %s", r.Req, out.Origin, r.Body)
	}

	// Nothing happened: the real client, with the token serve kept, sees no session.
	c, err := client.New(s.URL, &client.Options{Token: s.Token})
	require.NoError(t, err)
	sessions, err := c.Sessions(context.Background())
	require.NoError(t, err)
	assert.Empty(t, sessions, "the attacker's page made a session")
	_, err = os.Stat(marker)
	assert.True(t, os.IsNotExist(err), "the attacker's code ran (%s exists)", marker)
	assert.NotEmpty(t, s.Token, "serve without --token kept no token for %s in %s", s.URL, rt)
}
