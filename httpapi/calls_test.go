package httpapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// callServer serves a local-backend executor with a registry built from co.
func callServer(t *testing.T, mod func(*executor.Options), co calls.Options) *httptest.Server {
	t.Helper()
	srv, _ := callServerReg(t, mod, co)
	return srv
}

// callServerReg is callServer that also returns its calls registry.
func callServerReg(t *testing.T, mod func(*executor.Options), co calls.Options) (*httptest.Server, *calls.Registry) {
	t.Helper()
	te := testexec.Local(t, mod)
	reg := calls.New(te.Exec, co)
	t.Cleanup(func() { require.NoError(t, reg.Close()) })
	srv := httptest.NewServer(httpapi.New(te.Exec, httpapi.Options{Token: "tok", Workspace: te.WS, Calls: reg}))
	t.Cleanup(srv.Close)
	return srv, reg
}

// do sends a request with the token and returns the answer and its body.
func do(t testing.TB, srv *httptest.Server, method, path, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// idEvent is one Server-Sent Event with its id.
type idEvent struct{ name, id, data string }

func parseSSE(t testing.TB, r io.Reader) []idEvent {
	t.Helper()
	var out []idEvent
	var cur idEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" {
				out = append(out, cur)
			}
			cur = idEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		}
	}
	return out
}

// detach starts code in session detached and returns the call id.
func detach(t testing.TB, srv *httptest.Server, session, code string) string {
	t.Helper()
	body, _ := json.Marshal(api.ExecuteBody{Code: code, Detach: true})
	resp, b := do(t, srv, http.MethodPost, "/v1/sessions/"+session+"/execute", string(body))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", b)
	var d api.DetachedCall
	require.NoError(t, json.Unmarshal(b, &d))
	assert.Equal(t, session, d.SessionID)
	assert.Equal(t, d.CallID, resp.Header.Get(httpapi.CallIDHeader))
	return d.CallID
}

// waitCall polls GET /v1/calls/{id} until the call is done.
func waitCall(t testing.TB, srv *httptest.Server, id string) api.CallInfo {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, b := do(t, srv, http.MethodGet, "/v1/calls/"+id, "")
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
		var info api.CallInfo
		require.NoError(t, json.Unmarshal(b, &info))
		if info.State == api.CallDone {
			return info
		}
		require.True(t, time.Now().Before(deadline), "call %s did not end", id)
		time.Sleep(20 * time.Millisecond)
	}
}

// streamText joins the stdout of stream events.
func streamText(t testing.TB, evs []idEvent) string {
	t.Helper()
	var sb strings.Builder
	for _, e := range evs {
		if e.name == "stream" {
			var ev api.Event
			require.NoError(t, json.Unmarshal([]byte(e.data), &ev))
			sb.WriteString(ev.Text)
		}
	}
	return sb.String()
}

func TestDetachedCall(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	srv := callServer(t, nil, calls.Options{})
	id := detach(t, srv, "det", "import time\nfor i in range(5):\n    print(i, flush=True)\n    time.sleep(0.1)\n'end'")
	info := waitCall(t, srv, id)
	require.NotNil(t, info.Result)
	assert.Equal(t, api.StatusOK, info.Status)
	assert.Equal(t, "0\n1\n2\n3\n4\n", info.Result.Stdout)
	assert.Equal(t, "'end'", info.Result.Result)

	resp, b := do(t, srv, http.MethodGet, "/v1/calls/"+id+"/events", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	all := parseSSE(t, strings.NewReader(string(b)))
	require.GreaterOrEqual(t, len(all), 3)
	assert.Equal(t, "call", all[0].name)
	assert.Empty(t, all[0].id)
	for i, e := range all[1:] {
		assert.Equal(t, fmt.Sprint(i+1), e.id, "event %d (%s) is numbered in order", i, e.name)
	}
	last := all[len(all)-1]
	assert.Equal(t, "done", last.name)
	assert.Equal(t, fmt.Sprint(info.Events+1), last.id, "done follows the last event")
	assert.Equal(t, info.Result.Stdout, streamText(t, all))

	// Resuming after each id gives exactly the rest: by header and by query.
	for k := 1; k < len(all); k++ {
		_, b := do(t, srv, http.MethodGet, "/v1/calls/"+id+"/events", "", "Last-Event-ID", all[k].id)
		rest := parseSSE(t, strings.NewReader(string(b)))
		if k == len(all)-1 {
			require.Len(t, rest, 2, "after done: the final event again")
			assert.Equal(t, all[k], rest[1])
			continue
		}
		assert.Equal(t, all[k+1:], rest[1:], "after %s", all[k].id)
	}
	_, b = do(t, srv, http.MethodGet, "/v1/calls/"+id+"/events?after=2", "")
	assert.Equal(t, all[3:], parseSSE(t, strings.NewReader(string(b)))[1:])

	resp, b = do(t, srv, http.MethodGet, "/v1/sessions/det/calls", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var list struct{ Calls []api.CallInfo }
	require.NoError(t, json.Unmarshal(b, &list))
	require.Len(t, list.Calls, 1)
	assert.Equal(t, id, list.Calls[0].CallID)
	assert.Nil(t, list.Calls[0].Result)
	assert.Equal(t, api.StatusOK, list.Calls[0].Status)
}

// TestCallBadInput: every misuse gets a clear error and code.
func TestCallBadInput(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	srv := callServer(t, nil, calls.Options{MaxCalls: 1})
	first := detach(t, srv, "bad", "1")
	waitCall(t, srv, first)
	second := detach(t, srv, "bad", "2")
	waitCall(t, srv, second)
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		code                     api.Code
	}{
		{"unknown call", "GET", "/v1/calls/nope", "", nil, 404, api.CodeNotFound},
		{"unknown call events", "GET", "/v1/calls/nope/events", "", nil, 404, api.CodeNotFound},
		{"unknown call cancel", "POST", "/v1/calls/nope/cancel", "", nil, 404, api.CodeNotFound},
		{"expired call", "GET", "/v1/calls/" + first, "", nil, 410, api.CodeCallExpired},
		{"expired call events", "GET", "/v1/calls/" + first + "/events", "", nil, 410, api.CodeCallExpired},
		{"cancel finished", "POST", "/v1/calls/" + second + "/cancel", "", nil, 409, api.CodeCallFinished},
		{"bad Last-Event-ID", "GET", "/v1/calls/" + second + "/events", "", []string{"Last-Event-ID", "abc"}, 400, api.CodeInvalidRequest},
		{"negative Last-Event-ID", "GET", "/v1/calls/" + second + "/events", "", []string{"Last-Event-ID", "-1"}, 400, api.CodeInvalidRequest},
		{"Last-Event-ID past the end", "GET", "/v1/calls/" + second + "/events", "", []string{"Last-Event-ID", "999"}, 400, api.CodeInvalidRequest},
		{"bad after", "GET", "/v1/calls/" + second + "/events?after=x", "", nil, 400, api.CodeInvalidRequest},
		{"detach bad session", "POST", "/v1/sessions/bad..id/execute", `{"code":"1","detach":true}`, nil, 400, api.CodeInvalidRequest},
		{"detach empty code", "POST", "/v1/sessions/ok/execute", `{"code":" ","detach":true}`, nil, 400, api.CodeInvalidRequest},
		{"detach NUL in code", "POST", "/v1/sessions/ok/execute", `{"code":"1\u0000","detach":true}`, nil, 400, api.CodeInvalidRequest},
		{"detach not a bool", "POST", "/v1/sessions/ok/execute", `{"code":"1","detach":"yes"}`, nil, 400, api.CodeInvalidRequest},
		{"list bad session", "GET", "/v1/sessions/bad..id/calls", "", nil, 400, api.CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := do(t, srv, tc.method, tc.path, tc.body, tc.hdr...)
			require.Equal(t, tc.status, resp.StatusCode, "%s", b)
			var eb api.ErrorBody
			require.NoError(t, json.Unmarshal(b, &eb), "%s", b)
			assert.Equal(t, tc.code, eb.Error.Code)
			assert.NotEmpty(t, eb.Error.Message)
		})
	}
	resp, b := do(t, srv, http.MethodGet, "/v1/sessions/never/calls", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `{"calls":[]}`, string(b))

	// A detached call that cannot run (here: denied input) is accepted, then
	// ends with its error.
	id := detach(t, srv, "bad", `print(1)`)
	info := waitCall(t, srv, id)
	assert.Equal(t, api.StatusOK, info.Status)
	body, _ := json.Marshal(map[string]any{"code": "1", "inputs": []string{"/nonexistent/x.csv"}, "detach": true})
	resp, b = do(t, srv, http.MethodPost, "/v1/sessions/bad/execute", string(body))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", b)
	var d api.DetachedCall
	require.NoError(t, json.Unmarshal(b, &d))
	info = waitCall(t, srv, d.CallID)
	require.NotNil(t, info.Error, "%+v", info)
	assert.NotEmpty(t, info.Error.Message)
}

// TestCancelCall: cancel interrupts a running call; its Result says so, and a
// reader following its events live sees the end.
func TestCancelCall(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	srv := callServer(t, nil, calls.Options{})
	id := detach(t, srv, "can", "import time\nprint('go', flush=True)\ntime.sleep(60)")
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/calls/"+id+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		if strings.Contains(line, `"go\n"`) {
			break
		}
	}
	start := time.Now()
	cresp, b := do(t, srv, http.MethodPost, "/v1/calls/"+id+"/cancel", "")
	require.Equal(t, http.StatusNoContent, cresp.StatusCode, "%s", b)
	rest := parseSSE(t, rd)
	require.NotEmpty(t, rest)
	assert.Equal(t, "done", rest[len(rest)-1].name)
	assert.Less(t, time.Since(start), 15*time.Second)
	info := waitCall(t, srv, id)
	assert.True(t, info.Cancelled)
	assert.Equal(t, api.StatusTimeout, info.Status)
	require.NotNil(t, info.Result.Error)
	assert.Contains(t, info.Result.Error.Evalue, "canceled")
	assert.False(t, info.Result.StateLost)
}
