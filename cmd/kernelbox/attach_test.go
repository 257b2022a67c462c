package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
)

// cutProxy forwards TCP connections to a server; cut drops every connection.
type cutProxy struct {
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	accepted int
	wg       sync.WaitGroup
}

func newCutProxy(t testing.TB, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.cut(); p.wg.Wait() })
	p.wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.accepted++
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(out, in); out.Close() })
			p.wg.Go(func() { _, _ = io.Copy(in, out); in.Close() })
		}
	})
	return p
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// syncBuffer is a bytes.Buffer safe for a writer and a concurrent reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// twentySecondCell prints a numbered line every 100 ms for 20 s.
const twentySecondCell = "import time\nfor i in range(200):\n    print(f'line {i:03d}', flush=True)\n    time.sleep(0.1)"

func twentySecondLines() string {
	var sb strings.Builder
	for i := range 200 {
		fmt.Fprintf(&sb, "line %03d\n", i)
	}
	return sb.String()
}

// TestAttachAfterKilledConnection is the must-show: `kernelbox exec` of a 20 s
// cell is killed halfway (its HTTP connection with it); `kernelbox attach` on the
// call's id, whose own connection is cut once more on the way, prints every
// line once, in order, and exits 0; `attach --json` then prints the whole Result.
func TestAttachAfterKilledConnection(t *testing.T) {
	t.Parallel() // it mostly waits for its 20 s cell, on a serve of its own; no time bound is tight
	s := startServe(t)
	ex := exec.Command(kernelboxBin(t), "exec", "--server", s.URL, "--token", s.Token, "--session", "att", "-c", twentySecondCell)
	var exOut syncBuffer
	ex.Stdout = &exOut
	require.NoError(t, ex.Start())
	t.Cleanup(func() { _ = ex.Process.Kill(); _ = ex.Wait() })
	require.Eventually(t, func() bool { return strings.Contains(exOut.String(), "line 099") }, time.Minute, 10*time.Millisecond)
	require.NoError(t, ex.Process.Kill())
	_ = ex.Wait()

	c, err := client.New(s.URL, &client.Options{Token: s.Token})
	require.NoError(t, err)
	list, err := c.Calls(context.Background(), "att")
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, api.CallRunning, list[0].State, "the call goes on after its client died")
	id := list[0].CallID

	u := strings.TrimPrefix(s.URL, "http://")
	proxy := newCutProxy(t, u)
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- dispatch(context.Background(), []string{"attach", "--server", "http://" + proxy.ln.Addr().String(), "--token", s.Token, id}, &stdout, &stderr)
	}()
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "line 150") }, time.Minute, 10*time.Millisecond)
	proxy.cut()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("attach did not end")
	}
	require.NoError(t, err, "stderr: %s", stderr.String())
	assert.Equal(t, twentySecondLines(), stdout.String(), "every line once, in order, across the cut")
	assert.Empty(t, stderr.String())
	proxy.mu.Lock()
	assert.GreaterOrEqual(t, proxy.accepted, 2, "attach reconnected after the cut")
	proxy.mu.Unlock()

	stdout = syncBuffer{}
	err = dispatch(context.Background(), []string{"attach", id, "--server", s.URL, "--token", s.Token, "--json"}, &stdout, &stderr)
	require.NoError(t, err)
	var res api.Result
	require.NoError(t, json.Unmarshal([]byte(stdout.String()), &res))
	assert.Equal(t, api.StatusOK, res.Status)
	assert.Equal(t, twentySecondLines(), res.Stdout)
}

// TestExecDetach: --detach prints the id (or JSON) at once; attach follows it,
// with exec's exit codes.
func TestExecDetach(t *testing.T) {
	s := startServe(t)
	run := func(args ...string) (string, string, error) {
		var out, errb syncBuffer
		err := dispatch(context.Background(), append(args, "--server", s.URL, "--token", s.Token), &out, &errb)
		return out.String(), errb.String(), err
	}
	out, _, err := run("exec", "--session", "det", "--detach", "-c", "print('hi')\n1/0")
	require.NoError(t, err)
	id := strings.TrimSpace(out)
	require.NotEmpty(t, id)
	out, errOut, err := run("attach", id)
	assert.Equal(t, exitCode{1, ""}, err, "a call that raised exits 1, as exec does")
	assert.Equal(t, "hi\n", out)
	assert.Contains(t, errOut, "ZeroDivisionError")

	out, _, err = run("exec", "--session", "det", "--detach", "--json", "-c", "2")
	require.NoError(t, err)
	var d api.DetachedCall
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	assert.Equal(t, "det", d.SessionID)
	out, _, err = run("attach", "--json", d.CallID)
	require.NoError(t, err)
	assert.Contains(t, out, `"result": "2"`)

	for name, args := range map[string][]string{
		"unknown call":   {"attach", "nope"},
		"no call id":     {"attach"},
		"two ids":        {"attach", "a", "b"},
		"detach bad sid": {"exec", "--session", "bad/id", "--detach", "-c", "1"},
	} {
		_, _, err := run(args...)
		var ec exitCode
		require.ErrorAs(t, err, &ec, name)
		assert.Equal(t, 2, ec.code, "%s: %v", name, err)
	}
	_, _, err = run("attach", "nope")
	assert.Contains(t, err.Error(), "not_found")
}
