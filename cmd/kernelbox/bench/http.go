package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/undo"
)

// ServeFunc serves e's HTTP API on ln, requiring token, as `kernelbox serve`
// does; stop ends it. scoped is the secret of a scoped token that reaches the
// admin's sessions ("" when the server has none), for the row that compares
// the two. The command passes its own server as [Config.Serve], so that the
// benchmark measures serve's handler chain (guard, connection cap, tokens,
// audit log) without knowing it.
type ServeFunc func(ln net.Listener, e *executor.Executor, token string) (stop func(), scoped string, err error)

// The kinds of call the http scenario measures, each in blocks.
const (
	zmq        = iota // the reference: jupyter_client over ZMQ
	lib               // executor.Execute from Go
	httpNew           // serve's server, urllib: a new connection per call
	httpKeep          // serve's server, http.client: one connection
	httpScoped        // the same with a scoped token instead of the admin's
	bareNew           // a bare Go handler around the executor, urllib
	bareKeep          // the same, one connection
	floorNew          // a handler answering the same bytes at once, urllib
	floorKeep         // the same, one connection
	kinds
)

// httpTargets are the servers the http scenario calls, and serve's token.
type httpTargets struct {
	url, token, bare, floor string
	scoped                  string // a scoped token's secret, or ""
	session                 string
}

// httpTrivial measures the trivial cell from a Python client over HTTP (urllib
// with a new connection per call, and http.client keeping its connection), the
// same cell through the Go library, jupyter_client over ZMQ, and the Python
// same over a bare Go handler around the executor (the floor of a Go HTTP
// front end), and the Python client alone against a handler that answers the
// same bytes at once (the client in a hot loop), all in one loop of small
// blocks whose order rotates.
func (r *runner) httpTrivial(ctx context.Context, e *executor.Executor) ([]Row, error) {
	var stops undo.List
	defer func() { _ = stops.Run(time.Minute) }()
	t, err := r.httpServers(ctx, e, &stops)
	if err != nil {
		return nil, err
	}
	times := make([][]float64, kinds)
	i := 0
	run := func(kind int) error {
		first := i + 1
		i += r.iters(5, 10)
		d, err := r.httpBlock(ctx, e, t, kind, first, r.iters(5, 10))
		times[kind] = append(times[kind], d...)
		return err
	}
	main := []int{zmq, lib, httpNew, httpKeep, bareNew, bareKeep}
	if t.scoped != "" {
		main = append(main, httpScoped)
	}
	for round := 0; round < r.iters(4, 50); round++ {
		for k := range main {
			if err := run(main[(round+k)%len(main)]); err != nil {
				return nil, err
			}
		}
		for _, kind := range []int{floorNew, floorKeep} {
			if err := run(kind); err != nil {
				return nil, err
			}
		}
	}
	return r.httpRows(times), nil
}

// httpServers starts the servers the http scenario calls: serve's (r.c.Serve),
// the bare handler and the floor, each stopped by stops.
func (r *runner) httpServers(ctx context.Context, e *executor.Executor, stops *undo.List) (httpTargets, error) {
	t := httpTargets{session: "http"}
	if r.c.Serve == nil {
		return t, errors.New("no Config.Serve to measure")
	}
	var tb [16]byte
	_, _ = rand.Read(tb[:])
	t.token = hex.EncodeToString(tb[:])
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return t, err
	}
	stop, scoped, err := r.c.Serve(ln, e, t.token)
	t.scoped = scoped
	if err != nil {
		_ = ln.Close()
		return t, err
	}
	stops.Add("stop serve", func(context.Context) error { stop(); return nil })
	t.url = "http://" + ln.Addr().String()
	if _, _, err := r.exec(ctx, e, api.Request{SessionID: t.session, Code: "x = 0"}); err != nil {
		return t, err
	}
	answer, err := postTrivial(ctx, t.url, t.token, t.session)
	if err != nil {
		return t, err
	}
	t.floor, stop, err = serveBytes(answer)
	if err != nil {
		return t, err
	}
	stops.Add("stop floor", func(context.Context) error { stop(); return nil })
	t.bare, stop, err = serveBare(e)
	if err != nil {
		return t, err
	}
	stops.Add("stop bare", func(context.Context) error { stop(); return nil })
	return t, nil
}

// httpBlock makes n calls of one kind, numbered from first, and returns their times in ms.
func (r *runner) httpBlock(ctx context.Context, e *executor.Executor, t httpTargets, kind, first, n int) ([]float64, error) {
	switch kind {
	case zmq:
		a, err := r.ref.do("trivial", strconv.Itoa(n))
		if err != nil {
			return nil, err
		}
		return a.MS, nil
	case lib:
		var out []float64
		for k := 0; k < n; k++ {
			_, d, err := r.exec(ctx, e, api.Request{SessionID: t.session, Code: "x = " + strconv.Itoa(first+k) + "; x + 1"})
			if err != nil {
				return out, err
			}
			out = append(out, ms(d))
		}
		return out, nil
	}
	mode, u, s, token := "new", t.url, t.session, t.token
	if kind == httpKeep || kind == httpScoped || kind == bareKeep || kind == floorKeep {
		mode = "keepalive"
	}
	if kind == httpScoped {
		token = t.scoped
	}
	if kind == bareNew || kind == bareKeep {
		u = t.bare
	}
	if kind == floorNew || kind == floorKeep {
		u, s = t.floor, "-"
	}
	a, err := r.ref.do("http", mode, u, token, s, strconv.Itoa(n), strconv.Itoa(first))
	if err != nil {
		return nil, err
	}
	return a.MS, nil
}

// httpRows turns the http scenario's times into rows against the ZMQ reference.
func (r *runner) httpRows(times [][]float64) []Row {
	ref50, ref99 := percentile(times[zmq], .5), percentile(times[zmq], .99)
	row := func(kind int, name, note string) Row {
		return Row{Name: r.backend + name, N: len(times[kind]), KB50: percentile(times[kind], .5), KB99: percentile(times[kind], .99),
			Ref50: ref50, Ref99: ref99, RefLabel: "jupyter_client over ZMQ", Note: note}
	}
	rows := []Row{
		row(httpNew, ": trivial cell over HTTP, Python urllib", "a new connection per call, from Python"),
		row(httpKeep, ": trivial cell over HTTP, Python keep-alive", "http.client, one connection"),
	}
	if len(times[httpScoped]) > 0 {
		rows = append(rows, row(httpScoped, ": the same with a scoped token", "its hash, scope, session owner and rate checked on every call"))
	}
	return append(rows, []Row{
		row(lib, ": trivial cell, Go library (same loop)", "executor.Execute"),
		row(bareNew, ": the same over a bare Go handler, urllib", "net/http + executor.Execute + json.Marshal: no guard, no registry"),
		row(bareKeep, ": the same over a bare Go handler, keep-alive", "the floor of any Go HTTP front end to the executor"),
		{Name: "python HTTP client alone, urllib", N: len(times[floorNew]), KB50: percentile(times[floorNew], .5), KB99: percentile(times[floorNew], .99),
			Note: "against a Go handler answering the same bytes at once (a hot loop)"},
		{Name: "python HTTP client alone, keep-alive", N: len(times[floorKeep]), KB50: percentile(times[floorKeep], .5), KB99: percentile(times[floorKeep], .99),
			Note: "the same, one connection"},
	}...)
}

// postTrivial makes one call over HTTP and returns the answer's bytes.
func postTrivial(ctx context.Context, url, token, session string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/sessions/"+session+"/execute", bytes.NewReader([]byte(`{"code": "x = 1; x + 1"}`)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("http trivial: %s: %s", resp.Status, b)
	}
	return b, nil
}

// serveBare serves POST /v1/sessions/{id}/execute as the least a Go HTTP
// front end to e can: decode the body, run the call, encode its Result. What
// kernelbox's server takes above it is its own (guard, calls registry, limits).
func serveBare(e *executor.Executor) (string, func(), error) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions/{id}/execute", func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Code string `json:"code"`
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err := json.Unmarshal(body, &b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res, err := e.Execute(context.Background(), api.Request{SessionID: r.PathValue("id"), Code: b.Code})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out, _ := json.Marshal(res)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
	return serveHandler(mux)
}

// serveBytes serves body as the answer to every request on a loopback port.
func serveBytes(body []byte) (string, func(), error) {
	return serveHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
}

// serveHandler serves h on a loopback port.
func serveHandler(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return
		}
	}()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close(); <-done }, nil
}
