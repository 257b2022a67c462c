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

	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"
)

// ServeFunc serves e's HTTP API on ln, requiring token, as `kernelbox serve`
// does; stop ends it. [Config.Serve] lets the command pass its own server, so
// that the benchmark measures the same handler chain (guard, connection cap).
type ServeFunc func(ln net.Listener, e *executor.Executor, token string) (stop func(), err error)

// serveAPI is the default ServeFunc: the API (with its guard) without the
// command's connection cap.
func serveAPI(ln net.Listener, e *executor.Executor, token string) (func(), error) {
	reg := calls.New(e, calls.Options{})
	h := httpapi.New(e, httpapi.Options{Token: token, Hosts: httpapi.Hosts{Loopback: true}, Calls: reg})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close(); _ = reg.Close() }, nil
}

// httpTrivial measures the trivial cell from a Python client over HTTP (urllib
// with a new connection per call, and http.client keeping its connection), the
// same cell through the Go library, jupyter_client over ZMQ, and the Python
// same over a bare Go handler around the executor (the floor of a Go HTTP
// front end), and the Python client alone against a handler that answers the
// same bytes at once (the client in a hot loop), all in one loop of small
// blocks whose order rotates.
func (r *runner) httpTrivial(ctx context.Context, e *executor.Executor) ([]Row, error) {
	serve := r.c.Serve
	if serve == nil {
		serve = serveAPI
	}
	var tb [16]byte
	_, _ = rand.Read(tb[:])
	token := hex.EncodeToString(tb[:])
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	stop, err := serve(ln, e, token)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	defer stop()
	url := "http://" + ln.Addr().String()
	const session = "http"
	if _, _, err := r.exec(ctx, e, executor.Request{SessionID: session, Code: "x = 0"}); err != nil {
		return nil, err
	}
	answer, err := postTrivial(ctx, url, token, session)
	if err != nil {
		return nil, err
	}
	floorURL, stopFloor, err := serveBytes(answer)
	if err != nil {
		return nil, err
	}
	defer stopFloor()
	bareURL, stopBare, err := serveBare(e)
	if err != nil {
		return nil, err
	}
	defer stopBare()

	rounds, block := r.iters(4, 50), r.iters(5, 10)
	const (
		zmq = iota
		lib
		httpNew
		httpKeep
		bareNew
		bareKeep
		floorNew
		floorKeep
		kinds
	)
	times := make([][]float64, kinds)
	i := 0
	run := func(kind int) error {
		first := i + 1
		i += block
		switch kind {
		case zmq:
			a, err := r.ref.do("trivial", strconv.Itoa(block))
			if err != nil {
				return err
			}
			times[kind] = append(times[kind], a.MS...)
		case lib:
			for k := 0; k < block; k++ {
				_, d, err := r.exec(ctx, e, executor.Request{SessionID: session, Code: "x = " + strconv.Itoa(first+k) + "; x + 1"})
				if err != nil {
					return err
				}
				times[kind] = append(times[kind], ms(d))
			}
		default:
			mode, u, s := "new", url, session
			if kind == httpKeep || kind == bareKeep || kind == floorKeep {
				mode = "keepalive"
			}
			if kind == bareNew || kind == bareKeep {
				u = bareURL
			}
			if kind == floorNew || kind == floorKeep {
				u, s = floorURL, "-"
			}
			a, err := r.ref.do("http", mode, u, token, s, strconv.Itoa(block), strconv.Itoa(first))
			if err != nil {
				return err
			}
			times[kind] = append(times[kind], a.MS...)
		}
		return nil
	}
	main := []int{zmq, lib, httpNew, httpKeep, bareNew, bareKeep}
	for round := 0; round < rounds; round++ {
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
	ref50, ref99 := percentile(times[zmq], .5), percentile(times[zmq], .99)
	row := func(kind int, name, note string) Row {
		return Row{Name: r.backend + name, N: len(times[kind]), KB50: percentile(times[kind], .5), KB99: percentile(times[kind], .99),
			Ref50: ref50, Ref99: ref99, RefLabel: "jupyter_client over ZMQ", Note: note}
	}
	return []Row{
		row(httpNew, ": trivial cell over HTTP, Python urllib", "a new connection per call, from Python"),
		row(httpKeep, ": trivial cell over HTTP, Python keep-alive", "http.client, one connection"),
		row(lib, ": trivial cell, Go library (same loop)", "executor.Execute"),
		row(bareNew, ": the same over a bare Go handler, urllib", "net/http + executor.Execute + json.Marshal: no guard, no registry"),
		row(bareKeep, ": the same over a bare Go handler, keep-alive", "the floor of any Go HTTP front end to the executor"),
		{Name: "python HTTP client alone, urllib", N: len(times[floorNew]), KB50: percentile(times[floorNew], .5), KB99: percentile(times[floorNew], .99),
			Note: "against a Go handler answering the same bytes at once (a hot loop)"},
		{Name: "python HTTP client alone, keep-alive", N: len(times[floorKeep]), KB50: percentile(times[floorKeep], .5), KB99: percentile(times[floorKeep], .99),
			Note: "the same, one connection"},
	}, nil
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
		res, err := e.Execute(context.Background(), executor.Request{SessionID: r.PathValue("id"), Code: b.Code})
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
