package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/httpapi"
)

// instantRunner answers every call at once with the trivial cell's events and
// Result, so that a benchmark measures the HTTP path and the calls registry alone.
type instantRunner struct{}

func (instantRunner) Validate(req api.Request) error { return nil }

func (instantRunner) ExecuteStream(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
	n := 1
	out := api.Output{OutputType: "execute_result", Data: map[string]json.RawMessage{"text/plain": json.RawMessage(`"2"`)},
		Metadata: map[string]json.RawMessage{}, ExecutionCount: &n}
	onEvent(api.Event{Type: "status", State: "running"})
	onEvent(api.Event{Type: "result", Output: &out})
	return &api.Result{SessionID: req.SessionID, Status: api.StatusOK, ExecutionCount: 1, Outputs: []api.Output{out},
		Result: "2", Artifacts: []api.Artifact{}}, nil
}

// executeHandler is the HTTP API of `kernelbox serve` (guard included) on a
// registry of instantRunner.
func executeHandler(tb testing.TB) http.Handler {
	reg := calls.New(instantRunner{}, calls.Options{})
	tb.Cleanup(func() { _ = reg.Close() })
	return httpapi.New(nil, httpapi.Options{Token: "tok", Hosts: httpapi.Hosts{Loopback: true}, Calls: reg})
}

func serveExecute(h http.Handler, i int) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8700/v1/sessions/s/execute", strings.NewReader(`{"code": "x = `+strconv.Itoa(i)+`; x + 1"}`))
	r.Header.Set("Authorization", "Bearer tok")
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// BenchmarkExecuteHandler is one POST /v1/sessions/{id}/execute through the
// guard, the handler and the calls registry, without a network or a kernel.
func BenchmarkExecuteHandler(b *testing.B) {
	h := executeHandler(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if w := serveExecute(h, i); w.Code != http.StatusOK {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}

// onHandlerRunner is instantRunner that also records whether it ran on the
// goroutine of the HTTP handler (its caller's frames include execute).
type onHandlerRunner struct {
	instantRunner
	onHandler chan bool
}

func (o onHandlerRunner) ExecuteStream(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	found := false
	for f, more := frames.Next(); ; f, more = frames.Next() {
		found = found || strings.HasSuffix(f.Function, "httpapi.(*handler).execute")
		if !more {
			break
		}
	}
	o.onHandler <- found
	return o.instantRunner.ExecuteStream(ctx, req, onEvent)
}

// TestPlainCallOnHandlerGoroutine: a plain (not detached, not streamed) call
// runs on the handler's goroutine, sparing every call the handoff to a
// goroutine of its own and back; it still gets its call id.
func TestPlainCallOnHandlerGoroutine(t *testing.T) {
	run := onHandlerRunner{onHandler: make(chan bool, 1)}
	reg := calls.New(run, calls.Options{})
	t.Cleanup(func() { _ = reg.Close() })
	h := httpapi.New(nil, httpapi.Options{Token: "tok", Calls: reg})
	w := serveExecute(h, 1)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.True(t, <-run.onHandler, "the call ran on another goroutine than the handler's")
	assert.NotEmpty(t, w.Header().Get(httpapi.CallIDHeader))
	c, err := reg.Get(w.Header().Get(httpapi.CallIDHeader))
	require.NoError(t, err)
	assert.Equal(t, api.CallDone, c.Info(false, false).State)
}

// bigRunner answers every call with 64 KiB of stdout.
type bigRunner struct{ instantRunner }

func (bigRunner) ExecuteStream(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
	return &api.Result{SessionID: req.SessionID, Status: api.StatusOK, Outputs: []api.Output{}, Artifacts: []api.Artifact{},
		Stdout: strings.Repeat("x", 64<<10)}, nil
}

// TestAnswerHasContentLength: a JSON answer larger than net/http's buffer
// goes out with a Content-Length, not chunked (which a client has to undo).
func TestAnswerHasContentLength(t *testing.T) {
	reg := calls.New(bigRunner{}, calls.Options{})
	t.Cleanup(func() { _ = reg.Close() })
	srv := httptest.NewServer(httpapi.New(nil, httpapi.Options{Token: "tok", Calls: reg}))
	t.Cleanup(srv.Close)
	resp, body := do(t, srv, http.MethodPost, "/v1/sessions/s/execute", `{"code": "1"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, resp.TransferEncoding, "chunked")
	assert.EqualValues(t, len(body), resp.ContentLength)
	var res api.Result
	require.NoError(t, json.Unmarshal(body, &res))
	assert.Len(t, res.Stdout, 64<<10)
}

// TestExecuteHandlerAllocs bounds the allocations of one call through the
// guard, the handler and the calls registry (71 on 2026-12-02, 60 of them the
// request, the registry's call and its log, the Result's encoding), so that
// per-call work added to the path shows up here.
func TestExecuteHandlerAllocs(t *testing.T) {
	h := executeHandler(t)
	i := 0
	n := testing.AllocsPerRun(200, func() {
		i++
		if w := serveExecute(h, i); w.Code != http.StatusOK {
			t.Fatal(w.Code, w.Body.String())
		}
	})
	t.Logf("%.0f allocations per call (request built by httptest included)", n)
	assert.LessOrEqual(t, n, 90.0*(1+raceSlack))
}
