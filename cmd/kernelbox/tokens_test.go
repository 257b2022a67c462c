package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// tokenServe is one `kernelbox serve --backend local` shared by the scoped
// token tests, with its audit log where the test reads it.
type tokenServe struct {
	*server
	audit string
}

// call sends method path with body (JSON) as token and returns the status,
// the headers and the body.
func (s *tokenServe) call(t testing.TB, token, method, path, body string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// mint makes a scoped token with the admin token and returns its id and secret.
func (s *tokenServe) mint(t testing.TB, body string) (string, string) {
	t.Helper()
	code, _, out := s.call(t, s.Token, "POST", "/v1/tokens", body)
	require.Equal(t, http.StatusCreated, code, out)
	var ct api.CreatedToken
	require.NoError(t, json.Unmarshal([]byte(out), &ct))
	require.NotEmpty(t, ct.Token)
	return ct.ID, ct.Token
}

// auditLines reads the audit log.
func (s *tokenServe) auditLines(t testing.TB) []map[string]any {
	t.Helper()
	f, err := os.Open(s.audit)
	require.NoError(t, err)
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		out = append(out, m)
	}
	return out
}

func startTokenServe(t *testing.T, backend ...string) *tokenServe {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	s := startServeWith(t, serveOpts{token: "admin-token-123", args: []string{"--audit-log", path}, backend: backend})
	return &tokenServe{server: s, audit: path}
}

// TestScopedTokensDocker is the abuse test on the docker backend: the same
// refusals whatever runs the sessions.
func TestScopedTokensDocker(t *testing.T) {
	testenv.Image(t, docker.DefaultImage)
	t.Parallel()
	scopedAbuse(t, startTokenServe(t, "--backend", "docker"))
}

// TestScopedTokens, abuse: two scoped tokens whose agents try, as a
// prompt-injected agent would, to list, read, run in, watch, fork, hibernate
// and delete each other's sessions, on a real serve: every attempt is
// answered as for a missing session (404, the same words), and every attempt
// is in the audit log, without a secret.
func TestScopedTokens(t *testing.T) {
	s := startTokenServe(t)
	t.Run("abuse", func(t *testing.T) { t.Parallel(); scopedAbuse(t, s) })
	t.Run("limits", func(t *testing.T) { t.Parallel(); scopedLimits(t, s) })
	t.Run("revocation", func(t *testing.T) { t.Parallel(); scopedRevocation(t, s) })
	t.Run("cli", func(t *testing.T) { t.Parallel(); scopedCLI(t, s) })
	t.Run("mcp", func(t *testing.T) { t.Parallel(); scopedMCP(t, s) })
	t.Run("gateway", func(t *testing.T) { t.Parallel(); scopedGateway(t, s) })
	t.Run("dashboard", func(t *testing.T) { t.Parallel(); scopedDashboard(t, s) })
}

// scopedAbuse: B, whose patterns match every id, attacks A's sessions on
// every /v1 route, the gateway and the calls registry; A reaches out of its
// prefix; both are answered as for missing sessions, and it is all in the
// audit log without a secret.
func scopedAbuse(t *testing.T, s *tokenServe) {
	_, tokA := s.mint(t, `{"name":"agent-a","sessions":["a-*"],"max_sessions":2}`)
	_, tokB := s.mint(t, `{"name":"agent-b","sessions":["*"]}`) // every id: only ownership stands between them

	// A makes its session, a file, an artifact, and a call.
	code, hdr, out := s.call(t, tokA, "POST", "/v1/sessions/a-1/execute", `{"code":"import os; os.makedirs('outputs', exist_ok=True); open('outputs/secret.txt','w').write('A only'); open('notes.txt','w').write('A notes'); x = 41"}`)
	require.Equal(t, 200, code, out)
	callA := hdr.Get("Kernelbox-Call-Id")
	require.NotEmpty(t, callA)

	// B, with every pattern, does not see A's session.
	code, _, out = s.call(t, tokB, "GET", "/v1/sessions", "")
	require.Equal(t, 200, code)
	assert.NotContains(t, out, `"a-1"`)
	code, _, out = s.call(t, tokB, "GET", "/api/kernels", "")
	require.Equal(t, 200, code)
	assert.NotContains(t, out, `"a-1"`)
	code, _, out = s.call(t, s.Token, "GET", "/v1/sessions", "")
	require.Equal(t, 200, code)
	assert.Contains(t, out, `"a-1"`, "the admin sees every session")

	attacks := attackSession(t, s, tokB, "a-1", callA)
	abuseClosed(t, s, tokA, tokB)
	abuseOwn(t, s, tokA, tokB)
	abuseAudit(t, s, attacks, tokA, tokB)
}

// attack is one request of an attacker.
type attack struct{ method, path, body string }

// attackSession sends, as token tok, every request a prompt-injected agent
// would to another token's session id and its call, and checks each is
// answered as for a missing session (or call). It returns the attacks.
func attackSession(t *testing.T, s *tokenServe, tok, id, call string) []attack {
	// The answer for a session that does not exist, as the admin gets it.
	code, _, missing := s.call(t, s.Token, "GET", "/v1/sessions/a-nothere", "")
	require.Equal(t, 404, code)
	v1 := "/v1/sessions/" + id
	attacks := []attack{
		{"GET", v1, ""},
		{"POST", v1 + "/execute", `{"code":"print(x)"}`},
		{"POST", v1 + "/execute", `{"code":"print(x)","detach":true}`},
		{"POST", "/v1/sessions", `{"id":"` + id + `"}`},
		{"POST", v1 + "/interrupt", `{}`},
		{"POST", v1 + "/reset", `{}`},
		{"GET", v1 + "/calls", ""},
		{"GET", v1 + "/files", ""},
		{"GET", v1 + "/files/notes.txt", ""},
		{"PUT", v1 + "/files/evil.py", ""},
		{"DELETE", v1 + "/files/notes.txt", ""},
		{"POST", v1 + "/files:batch", `{"download":["notes.txt"]}`},
		{"GET", v1 + "/artifacts", ""},
		{"GET", "/v1/artifacts/" + id + "/secret.txt", ""},
		{"POST", v1 + "/hibernate", `{}`},
		{"POST", v1 + "/resume", `{}`},
		{"POST", v1 + "/fork", `{"id":"b-stolen"}`},
		{"DELETE", v1, ""},
		{"GET", "/api/kernels/" + id, ""},
		{"DELETE", "/api/kernels/" + id, ""},
		{"POST", "/api/kernels/" + id + "/interrupt", `{}`},
		{"GET", "/api/kernels/" + id + "/channels", ""},
	}
	for _, a := range attacks {
		code, _, out := s.call(t, tok, a.method, a.path, a.body)
		assert.Equal(t, 404, code, "%s %s: %s", a.method, a.path, out)
		if strings.HasPrefix(a.path, "/v1/") {
			assert.JSONEq(t, strings.ReplaceAll(missing, "a-nothere", id), out, "%s %s: worded as a missing session", a.method, a.path)
		}
	}
	// The call, by id.
	code, _, callMissing := s.call(t, s.Token, "GET", "/v1/calls/c-never-given", "")
	require.Equal(t, 404, code)
	for _, a := range []attack{
		{"GET", "/v1/calls/" + call, ""},
		{"GET", "/v1/calls/" + call + "/events", ""},
		{"POST", "/v1/calls/" + call + "/cancel", `{}`},
	} {
		code, _, out := s.call(t, tok, a.method, a.path, a.body)
		assert.Equal(t, 404, code, "%s %s: %s", a.method, a.path, out)
		assert.JSONEq(t, strings.ReplaceAll(callMissing, "c-never-given", call), out, "%s: worded as a call never given out", a.path)
	}
	return attacks
}

// abuseClosed: a closed session keeps its owner: what it left (artifacts,
// calls) stays A's, and its id out of B's reach.
func abuseClosed(t *testing.T, s *tokenServe, tokA, tokB string) {
	code, hdr, out := s.call(t, tokA, "POST", "/v1/sessions/a-9/execute", `{"code":"import os; os.makedirs('outputs', exist_ok=True); open('outputs/left.txt','w').write('A left this')"}`)
	require.Equal(t, 200, code, out)
	callA9 := hdr.Get("Kernelbox-Call-Id")
	code, _, out = s.call(t, tokA, "DELETE", "/v1/sessions/a-9", "")
	require.Equal(t, 204, code, out)
	for _, a := range []attack{
		{"GET", "/v1/sessions/a-9/artifacts", ""},
		{"GET", "/v1/artifacts/a-9/left.txt", ""},
		{"GET", "/v1/sessions/a-9/calls", ""},
		{"GET", "/v1/calls/" + callA9, ""},
		{"POST", "/v1/sessions", `{"id":"a-9"}`},
	} {
		code, _, out := s.call(t, tokB, a.method, a.path, a.body)
		assert.Equal(t, 404, code, "B after A closed a-9: %s %s: %s", a.method, a.path, out)
		assert.NotContains(t, out, "A left this")
	}
	code, _, out = s.call(t, tokA, "GET", "/v1/artifacts/a-9/left.txt", "")
	assert.Equal(t, 200, code, out)
	assert.Equal(t, "A left this", out)
}

// abuseOwn: A's session is untouched; A cannot reach out of its prefix (B's
// session, a new id, a fork's target), owns at most max_sessions, and gets
// none of the admin's routes.
func abuseOwn(t *testing.T, s *tokenServe, tokA, tokB string) {
	code, _, out := s.call(t, tokA, "POST", "/v1/sessions/a-1/execute", `{"code":"print(x + 1, open('notes.txt').read())"}`)
	require.Equal(t, 200, code, out)
	assert.Contains(t, out, "42 A notes")

	code, _, out = s.call(t, tokB, "POST", "/v1/sessions/b-1/execute", `{"code":"y = 1"}`)
	require.Equal(t, 200, code, out)
	for _, p := range []string{"/v1/sessions/b-1", "/v1/sessions/b-1/files", "/v1/sessions/b-1/artifacts"} {
		code, _, out = s.call(t, tokA, "GET", p, "")
		assert.Equal(t, 404, code, "A: %s: %s", p, out)
	}
	code, _, out = s.call(t, tokA, "POST", "/v1/sessions/b-2/execute", `{"code":"1"}`)
	assert.Equal(t, 404, code, "A creating a session out of its patterns: %s", out)
	code, _, out = s.call(t, tokA, "POST", "/v1/sessions/a-1/fork", `{"id":"b-copy"}`)
	assert.Equal(t, 404, code, "a fork out of scope: %s", out)
	code, _, out = s.call(t, tokA, "POST", "/v1/sessions/a-1/fork", `{"id":"a-2"}`)
	require.Equal(t, 201, code, out)
	code, _, out = s.call(t, tokA, "POST", "/v1/sessions", `{"id":"a-3"}`)
	assert.Equal(t, 429, code, "max_sessions 2: %s", out)
	assert.Contains(t, out, "at most 2")
	for _, p := range []string{"/v1/tokens", "/metrics"} {
		code, _, out = s.call(t, tokA, "GET", p, "")
		assert.Equal(t, 403, code, "%s: %s", p, out)
	}
	code, _, out = s.call(t, tokA, "POST", "/v1/tokens", `{"name":"wider","sessions":["*"]}`)
	assert.Equal(t, 403, code, "a scoped token cannot mint: %s", out)
	code, _, out = s.call(t, tokA, "GET", "/v1/token", "")
	require.Equal(t, 200, code, out)
	assert.Contains(t, out, `"agent-a"`)
}

// abuseAudit: the audit log has every one of B's attacks on a-1 (its method,
// session and 404, as refused), and no secret.
func abuseAudit(t *testing.T, s *tokenServe, attacks []attack, secrets ...string) {
	raw, err := os.ReadFile(s.audit)
	require.NoError(t, err)
	for _, tok := range append(secrets, s.Token) {
		assert.NotContains(t, string(raw), tok, "a secret in the audit log")
	}
	logged := map[string]int{}
	for _, l := range s.auditLines(t) {
		if l["token_name"] == "agent-b" && l["outcome"] == "refused" && l["status"] == float64(404) && l["session"] == "a-1" {
			logged[l["method"].(string)]++
		}
	}
	want := map[string]int{}
	for _, a := range attacks {
		if a.path != "/v1/sessions" { // its session is in the body: logged with it too
			want[a.method]++
		}
	}
	for m, n := range want {
		assert.GreaterOrEqual(t, logged[m], n, "B's %s attacks on a-1 in the audit log", m)
	}
}

// scopedLimits: a watch-only token, a template out of scope, the call rate,
// expiry, bad tokens.
func scopedLimits(t *testing.T, s *tokenServe) {
	code, _, out := s.call(t, s.Token, "POST", "/v1/sessions", `{"id":"w-1"}`)
	require.Equal(t, 201, code, out)
	_, tokW := s.mint(t, `{"name":"watcher","sessions":["w-1"],"ops":["watch"]}`)
	code, _, out = s.call(t, tokW, "GET", "/v1/sessions/w-1", "")
	assert.Equal(t, 200, code, "the admin's session in the watcher's scope: %s", out)
	code, _, out = s.call(t, tokW, "GET", "/v1/sessions", "")
	assert.Equal(t, 200, code)
	assert.Contains(t, out, `"w-1"`)
	for _, a := range []struct{ method, path, body string }{
		{"POST", "/v1/sessions/w-1/execute", `{"code":"1"}`},
		{"DELETE", "/v1/sessions/w-1", ""},
		{"GET", "/v1/sessions/w-1/files", ""},
		{"POST", "/v1/sessions/w-1/hibernate", `{}`},
	} {
		code, _, out = s.call(t, tokW, a.method, a.path, a.body)
		assert.Equal(t, 403, code, "watch only: %s %s: %s", a.method, a.path, out)
		assert.Contains(t, out, "permission_denied")
	}

	_, tokT := s.mint(t, `{"name":"templated","sessions":["t-*"],"templates":["python-analyst"]}`)
	code, _, out = s.call(t, tokT, "POST", "/v1/sessions/t-1/execute", `{"code":"1"}`)
	assert.Equal(t, 403, code, "the default template is out of scope: %s", out)
	assert.Contains(t, out, "python-analyst")

	_, tokR := s.mint(t, `{"name":"rated","sessions":["r-1"],"rate_per_minute":2}`)
	for i := range 2 {
		code, _, out = s.call(t, tokR, "POST", "/v1/sessions/r-1/execute", `{"code":"1"}`)
		require.Equal(t, 200, code, "call %d: %s", i, out)
	}
	code, hdr, out := s.call(t, tokR, "POST", "/v1/sessions/r-1/execute", `{"code":"1"}`)
	assert.Equal(t, 429, code, out)
	assert.Contains(t, out, "rate_limited")
	assert.NotEmpty(t, hdr.Get("Retry-After"))

	_, tokE := s.mint(t, `{"name":"brief","sessions":["e-1"],"ttl_seconds":1}`)
	time.Sleep(1100 * time.Millisecond)
	code, _, out = s.call(t, tokE, "GET", "/v1/sessions", "")
	assert.Equal(t, 401, code, out)
	assert.Contains(t, out, "expired")

	for _, bad := range []string{"", tokW[:len(tokW)-1], tokW + "x", strings.ToUpper(tokW), strings.Repeat("k", 8000), "Bearer " + tokW} {
		code, _, out = s.call(t, bad, "GET", "/v1/sessions", "")
		assert.Equal(t, 401, code, "%.30q: %s", bad, out)
	}
	code, _, out = s.call(t, s.Token, "POST", "/v1/tokens", `{"name":"empty","sessions":[]}`)
	assert.Equal(t, 400, code, out)

	// 50 creations at once against max_sessions 3: exactly 3 made.
	_, tokM := s.mint(t, `{"name":"racer","sessions":["race-*"],"max_sessions":3}`)
	var wg sync.WaitGroup
	codes := make([]int, 50)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _, _ = s.call(t, tokM, "POST", "/v1/sessions", fmt.Sprintf(`{"id":"race-%d"}`, i))
		}()
	}
	wg.Wait()
	made := 0
	for _, c := range codes {
		if c == 201 {
			made++
		} else {
			assert.Equal(t, 429, c)
		}
	}
	assert.Equal(t, 3, made, "sessions made by 50 racing creations with max_sessions 3: %v", codes)
	code, _, out = s.call(t, tokM, "GET", "/v1/sessions", "")
	require.Equal(t, 200, code)
	assert.Equal(t, 3, strings.Count(out, `"race-`), out)
}

// scopedRevocation: revoking a token ends its open call (and the call's
// stream) with the reason, and its next request is 401.
func scopedRevocation(t *testing.T, s *tokenServe) {
	id, tok := s.mint(t, `{"name":"doomed","sessions":["v-*"]}`)
	for _, sid := range []string{"v-1", "v-2"} { // kernels up: the calls below run at once
		code, _, out := s.call(t, tok, "POST", "/v1/sessions/"+sid+"/execute", `{"code":"1"}`)
		require.Equal(t, 200, code, out)
	}

	req, err := http.NewRequest("POST", s.URL+"/v1/sessions/v-1/execute", strings.NewReader(`{"code":"import time; time.sleep(60)"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	plain := make(chan string, 1)
	go func() {
		_, _, out := s.call(t, tok, "POST", "/v1/sessions/v-2/execute", `{"code":"import time; time.sleep(60)"}`)
		plain <- out
	}()
	time.Sleep(1500 * time.Millisecond) // both calls running
	start := time.Now()
	code, _, out := s.call(t, s.Token, "DELETE", "/v1/tokens/"+id, "")
	require.Equal(t, 204, code, out)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	t.Logf("the stream ended %s after the revocation", time.Since(start))
	assert.Less(t, time.Since(start), 20*time.Second, "the stream ended at the revocation")
	assert.Contains(t, string(rest), "revoked", "the stream says why")
	select {
	case out := <-plain:
		t.Logf("the plain call ended %s after the revocation", time.Since(start))
		assert.Contains(t, out, "revoked", "the plain call's answer says why")
	case <-time.After(30 * time.Second):
		t.Fatal("the plain call did not end at the revocation")
	}
	code, _, out = s.call(t, tok, "GET", "/v1/sessions", "")
	assert.Equal(t, 401, code, out)
}

// TestScopedTokensSurviveRestart: tokens and session owners outlive serve; a
// session hibernated at the stop keeps its owner (the other token still gets
// 404, the owner gets its variables back); a token file that does not parse
// stops serve from starting, saying what to do.
func TestScopedTokensSurviveRestart(t *testing.T) {
	py := testenv.Jupyter(t)
	t.Parallel()
	ws, data := testDirs(t)
	args := []string{"--backend", "local", "--python", py, "--workspace", ws, "--workdir", data, "--token", "tk", "--on-stop", "hibernate"}
	cmd, url, _ := rawServe(t, args...)
	s := &tokenServe{server: &server{URL: url, Token: "tk"}}
	_, tokA := s.mint(t, `{"name":"keeper","sessions":["r-*"]}`)
	_, tokB := s.mint(t, `{"name":"other","sessions":["*"]}`)
	code, _, out := s.call(t, tokA, "POST", "/v1/sessions/r-1/execute", `{"code":"x = 41"}`)
	require.Equal(t, 200, code, out)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())

	cmd, url, log := rawServe(t, args...)
	s.URL = url
	code, _, out = s.call(t, tokB, "GET", "/v1/sessions/r-1", "")
	assert.Equal(t, 404, code, "the other token, after the restart: %s", out)
	code, _, out = s.call(t, tokB, "GET", "/v1/sessions", "")
	assert.Equal(t, 200, code)
	assert.NotContains(t, out, "r-1")
	code, _, out = s.call(t, tokA, "GET", "/v1/sessions/r-1", "")
	require.Equal(t, 200, code, "%s\n%s", out, log)
	assert.Contains(t, out, `"hibernated"`)
	code, _, out = s.call(t, tokA, "POST", "/v1/sessions/r-1/execute", `{"code":"x + 1"}`)
	require.Equal(t, 200, code, out)
	assert.Contains(t, out, `"result":"42"`)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())

	require.NoError(t, os.WriteFile(filepath.Join(ws, "state", "tokens.json"), []byte(`{"version":1,"tokens":[{"id":`), 0o600))
	bad := exec.Command(kernelboxBin(t), append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	outb, err := bad.CombinedOutput()
	require.Error(t, err, "serve started on a token file it cannot read:\n%s", outb)
	assert.Contains(t, string(outb), "tokens.json cannot be read")
	assert.Contains(t, string(outb), "remove it to revoke every scoped token")
}
