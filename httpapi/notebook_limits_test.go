package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/stretchr/testify/require"
)

// These tests measure allocation with runtime.MemStats, which counts the whole
// process, so none of them runs in parallel with the others.

// notebookBody returns a request body whose notebook has n cells, each made by cell(i).
func notebookBody(n int, cell func(b *bytes.Buffer, i int)) []byte {
	var b bytes.Buffer
	b.WriteString(`{"notebook": {"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		cell(&b, i)
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}

func tinyCode(b *bytes.Buffer, i int) {
	b.WriteString(`{"cell_type":"code","metadata":{},"outputs":[],"execution_count":null,"source":"1"}`)
}

func tinyMarkdown(b *bytes.Buffer, i int) {
	b.WriteString(`{"cell_type":"markdown","metadata":{},"source":"# a title of some length, x"}`)
}

// allocated returns the bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// post sends body and returns the status and the error code of the answer (""
// on success); the answer is read without keeping it.
func post(t testing.TB, ctx context.Context, url string, body []byte) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/notebooks/run", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		_, err := io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, "", ""
	}
	var e httpapi.ErrorBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	return resp.StatusCode, string(e.Error.Code), e.Error.Message
}

// TestNotebookDisabledRefusedUnread repeats issue 21 item 3: a 62 MiB notebook of
// 700,000 cells sent to a server that cannot run it is refused before its body
// is read, not after parsing it.
func TestNotebookDisabledRefusedUnread(t *testing.T) {
	srv := notebookServer(t, false, httpapi.Options{})
	body := notebookBody(700_000, tinyCode)
	require.Greater(t, len(body), 55<<20)
	var status int
	var code string
	n := allocated(func() { status, code, _ = post(t, context.Background(), srv.URL, body) })
	t.Logf("%d MiB body: %d %s, %.1f MiB allocated", len(body)>>20, status, code, float64(n)/(1<<20))
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "disabled", code)
	require.Less(t, n, uint64(4<<20), "the body was read")
}

// TestNotebookHugeRefusedEarly sends the same flood to a server that can run
// notebooks: it is refused at the cell limit, having read a small part of it.
func TestNotebookHugeRefusedEarly(t *testing.T) {
	srv := notebookServer(t, true, httpapi.Options{})
	body := notebookBody(700_000, tinyMarkdown)
	var status int
	var code, msg string
	n := allocated(func() { status, code, msg = post(t, context.Background(), srv.URL, body) })
	t.Logf("%d MiB body: %d %s %q, %.1f MiB allocated", len(body)>>20, status, code, msg, float64(n)/(1<<20))
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Equal(t, "too_large", code)
	require.Less(t, n, uint64(16<<20))

	// Sent without a Content-Length, it is read up to the cell limit only.
	n = allocated(func() {
		req, err := http.NewRequest("POST", srv.URL+"/v1/notebooks/run", io.MultiReader(bytes.NewReader(body)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var e httpapi.ErrorBody
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		status, code, msg = resp.StatusCode, string(e.Error.Code), e.Error.Message
	})
	// What it costs is bounded by the cell limit (about 2 KiB a cell, read or
	// not: maps and the cell), not by the body.
	t.Logf("chunked: %d %s %q, %.1f MiB allocated", status, code, msg, float64(n)/(1<<20))
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Contains(t, msg, "more than 10000 cells")
	require.Less(t, n, uint64(32<<20))
}

// TestNotebookLimitsByDefault: with no options the server takes notebooks of up
// to 16 MiB and 10,000 cells, and says which flag raises each limit.
func TestNotebookLimitsByDefault(t *testing.T) {
	srv := notebookServer(t, true, httpapi.Options{})
	ctx := context.Background()

	status, code, msg := post(t, ctx, srv.URL, notebookBody(10_001, tinyMarkdown))
	require.Equal(t, http.StatusRequestEntityTooLarge, status, msg)
	require.Equal(t, "too_large", code)
	require.Contains(t, msg, "10000 cells")
	require.Contains(t, msg, "--max-notebook-cells")

	status, _, msg = post(t, ctx, srv.URL, notebookBody(10_000, tinyMarkdown))
	require.Equal(t, http.StatusOK, status, msg)

	big := func(size int) []byte {
		return notebookBody(1, func(b *bytes.Buffer, _ int) {
			b.WriteString(`{"cell_type":"markdown","metadata":{},"source":"`)
			b.WriteString(strings.Repeat("x", size))
			b.WriteString(`"}`)
		})
	}
	status, code, msg = post(t, ctx, srv.URL, big(16<<20))
	require.Equal(t, http.StatusRequestEntityTooLarge, status, msg)
	require.Equal(t, "too_large", code)
	require.Contains(t, msg, "16 MiB")
	require.Contains(t, msg, "--max-notebook-bytes")

	status, _, msg = post(t, ctx, srv.URL, big(16<<20-200))
	require.Equal(t, http.StatusOK, status, msg)

	// Without a Content-Length the limit is met while reading.
	req, err := http.NewRequest("POST", srv.URL+"/v1/notebooks/run", io.MultiReader(bytes.NewReader(big(16<<20))))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var e httpapi.ErrorBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%v", e)
	require.Contains(t, e.Error.Message, "--max-notebook-bytes")
}

// TestNotebookConcurrentRuns: past the limit of notebooks running at once (2 by
// default), a request is refused at once, not queued, and a slot freed is reused.
func TestNotebookConcurrentRuns(t *testing.T) {
	srv := notebookServer(t, true, httpapi.Options{})
	sleeper := notebookBody(1, func(b *bytes.Buffer, _ int) {
		b.WriteString(`{"cell_type":"code","metadata":{},"outputs":[],"execution_count":null,"source":"import time\ntime.sleep(120)"}`)
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/notebooks/run", bytes.NewReader(sleeper))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	// Both run once their sessions exist.
	require.Eventually(t, func() bool { return len(listSessions(t, srv)) == 2 }, 60*time.Second, 50*time.Millisecond)

	small := notebookBody(1, tinyMarkdown)
	start := time.Now()
	qctx, qcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer qcancel()
	status, code, msg := post(t, qctx, srv.URL, small)
	require.Equal(t, http.StatusTooManyRequests, status, msg)
	require.Equal(t, "too_many_notebook_runs", code)
	require.Contains(t, msg, "--max-notebook-runs")
	require.Less(t, time.Since(start), 2*time.Second)

	// Dropping the two requests frees their slots.
	cancel()
	require.Eventually(t, func() bool {
		status, _, _ := post(t, context.Background(), srv.URL, small)
		return status == http.StatusOK
	}, 60*time.Second, 100*time.Millisecond)
}

func listSessions(t testing.TB, srv *httptest.Server) []any {
	t.Helper()
	resp, err := http.Get(srv.URL + "/v1/sessions")
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct{ Sessions []any }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Sessions
}

// TestNotebookRunMemoryBound: a notebook at the size limit costs a small
// multiple of its size in allocation, parse and answer together (all of it
// counted, not just what is live at once). The worst cases are a single huge cell
// (the decoder's buffer grows by doubling to hold it) and many small cells (a
// map per cell); the old code allocated 16 to 28 times the size.
func TestNotebookRunMemoryBound(t *testing.T) {
	srv := notebookServer(t, true, httpapi.Options{})
	// Code cells with no source are skipped, so no kernel is needed; each carries
	// an image output as a notebook file does.
	for name, tc := range map[string]struct{ cells, pad int }{
		"1000 images":      {1000, 16 << 10},
		"10000 cells":      {10_000, 1500},
		"one 15 MiB image": {1, 15 << 20},
	} {
		t.Run(name, func(t *testing.T) {
			body := notebookBody(tc.cells, func(b *bytes.Buffer, i int) {
				fmt.Fprintf(b, `{"cell_type":"code","metadata":{},"execution_count":%d,"source":"","outputs":[{"output_type":"display_data","metadata":{},"data":{"image/png":"`, i+1)
				b.WriteString(strings.Repeat("A", tc.pad))
				b.WriteString(`","text/plain":"<Figure>"}}]}`)
			})
			var status int
			var msg string
			n := allocated(func() { status, _, msg = post(t, context.Background(), srv.URL, body) })
			ratio := float64(n) / float64(len(body))
			t.Logf("%.1f MiB body: %.1f MiB allocated, %.1fx", float64(len(body))/(1<<20), float64(n)/(1<<20), ratio)
			require.Equal(t, http.StatusOK, status, msg)
			require.Less(t, ratio, 5.0+raceSlack)
		})
	}
}
