package main

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/httpapi"
)

// TestConnLimiterKeepsStreams: with the only ordinary slot taken, a stream with
// the token runs in the reserved slot for longer than reservedWait without being
// cut; a request without it there is refused; past the cap a connection is
// closed at accept.
func TestConnLimiterKeepsStreams(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := newConnLimiter(ln, 2, slog.New(slog.DiscardHandler))
	require.Equal(t, 1, l.reserve)
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 4 {
			_, _ = io.WriteString(w, strings.Repeat("x", i+1)+"\n")
			w.(http.Flusher).Flush()
			time.Sleep(time.Second)
		}
	})
	// The stream is served at /metrics, a route that needs the token.
	api := httpapi.New(nil, httpapi.Options{Token: "tok", Reserve: l, Metrics: stream})
	srv := &http.Server{Handler: api, ConnContext: connContext, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	// An idle keep-alive connection holds the ordinary slot.
	idle, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer idle.Close()
	_, err = io.WriteString(idle, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.Equal(t, 1, l.openConns())

	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer tok")
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err = c.Do(req)
	require.NoError(t, err)
	// Past the cap while the stream runs: closed at once.
	over, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_ = over.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = over.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
	over.Close()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err, "the stream was cut")
	require.Equal(t, "x\nxx\nxxx\nxxxx\n", string(b))
	require.EqualValues(t, 1, l.refused.Load())

	require.Eventually(t, func() bool { return l.openConns() == 1 }, 5*time.Second, 10*time.Millisecond)
	resp, err = c.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.EqualValues(t, 1, l.refusedReserved.Load())
}
