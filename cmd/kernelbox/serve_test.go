package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/internal/procs"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// rawServe starts `kernelbox serve` with extra arguments and returns the process and
// its URL once healthy. The caller ends the process. A graceful stop closes the
// sessions (--on-stop close) unless args say otherwise.
func rawServe(t *testing.T, args ...string) (*exec.Cmd, string, *lockedBuffer) {
	t.Helper()
	return rawServeEnv(t, nil, args...)
}

// rawServeEnv is rawServe with env added to serve's environment (a parallel
// test cannot use t.Setenv).
func rawServeEnv(t *testing.T, env []string, args ...string) (*exec.Cmd, string, *lockedBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	log := &lockedBuffer{}
	cmd := exec.Command(kernelboxBin(t), append([]string{"serve", "--listen", addr, "--on-stop", "close"}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c, err := client.New("http://"+addr, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		h, err := c.Health(context.Background())
		return err == nil && h.Status == "ok"
	}, 60*time.Second, 50*time.Millisecond, "serve did not become healthy:\n%s", log)
	return cmd, "http://" + addr, log
}

// execCLI runs `kernelbox exec --json` against url and returns the Result and exit code.
func execCLI(t *testing.T, url, session, code string) (*api.Result, int) {
	t.Helper()
	cmd := exec.Command(kernelboxBin(t), "exec", "--server", url, "--session", session, "--json", "-c", code)
	out, err := cmd.Output()
	rc := 0
	if ee, ok := err.(*exec.ExitError); ok {
		rc = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	var r api.Result
	require.NoError(t, json.Unmarshal(out, &r), "%s", out)
	return &r, rc
}

// TestServeLocal is the foundation's must-show: state persists, an error is an error,
// and no Python process of kernelbox's is left after serve exits, by SIGTERM or SIGKILL.
func TestServeLocal(t *testing.T) {
	py := testenv.Jupyter(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			ws, data := testDirs(t)
			cmd, url, log := rawServe(t, "--backend", "local", "--python", py, "--workspace", ws, "--workdir", data)
			r, rc := execCLI(t, url, "a", "x = 41")
			require.Equal(t, 0, rc)
			r, rc = execCLI(t, url, "a", "x + 1")
			require.Equal(t, 0, rc)
			require.Equal(t, "42", r.Result)
			r, rc = execCLI(t, url, "a", "1/0")
			require.Equal(t, 1, rc)
			require.Equal(t, api.StatusError, r.Status)
			require.Equal(t, "ZeroDivisionError", r.Error.Ename)
			execCLI(t, url, "b", "y = 1")

			pid := cmd.Process.Pid
			require.GreaterOrEqual(t, len(procs.Owned(pid)), 3, "a server and two kernels")
			require.NoError(t, cmd.Process.Signal(sig))
			_ = cmd.Wait()
			require.Eventually(t, func() bool { return len(procs.Owned(pid)) == 0 }, 15*time.Second, 100*time.Millisecond,
				"left after %s: %v\n%s", sig, describe(procs.Owned(pid)), log)
		})
	}
}

// TestServeDockerKilled: after a SIGKILL of the server its containers outlive it,
// and a next start that has not their state (deleted here; TestServeDockerAdopt
// is the start that has it) reaps them; after SIGTERM with --on-stop close
// nothing is left.
func TestServeDockerKilled(t *testing.T) {
	testenv.Docker(t)
	ws, data := testDirs(t)
	cmd, url, _ := rawServe(t, "--backend", "docker", "--workspace", ws, "--workdir", data)
	r, _ := execCLI(t, url, "k1", "x = 1")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	execCLI(t, url, "k2", "x = 2")
	first := cmd.Process.Pid
	require.Len(t, testenv.Containers(t, first), 2)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	require.Len(t, testenv.Containers(t, first), 2, "killed with SIGKILL, the server could not clean up")
	require.NoError(t, os.RemoveAll(filepath.Join(ws, "state")))

	cmd, url, log := rawServe(t, "--backend", "docker", "--workspace", ws, "--workdir", data)
	require.Empty(t, testenv.Containers(t, first), "the next start reaps the dead owner's containers:\n%s", log)
	r, _ = execCLI(t, url, "k1", "'x' in dir()")
	require.Equal(t, "False", r.Result)
	second := cmd.Process.Pid
	require.Len(t, testenv.Containers(t, second), 1)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
	require.Empty(t, testenv.Containers(t, second), "SIGTERM leaves no container")
}

func describe(pids []int) []string {
	var out []string
	for _, p := range pids {
		out = append(out, procs.Cmdline(p))
	}
	return out
}

// TestServeNotebookLimitFlags: the notebook limits of serve's flags reach the
// handler, and its answers name them.
func TestServeNotebookLimitFlags(t *testing.T) {
	testenv.Jupyter(t)
	ws, data := testDirs(t) // not the default .kernelbox in the source tree
	_, url, _ := rawServe(t, "--backend", "local", "--token", "tok", "--max-notebook-bytes", "4096", "--max-notebook-cells", "2",
		"--workspace", ws, "--workdir", data)
	md := `{"cell_type": "markdown", "metadata": {}, "source": "x"}`
	for body, want := range map[string]string{
		`{"notebook": {"nbformat": 4, "nbformat_minor": 4, "metadata": {"pad": "` + strings.Repeat("x", 5000) + `"}, "cells": []}}`: "limit of 4 KiB (4096 bytes); send a smaller notebook or start the server with a higher --max-notebook-bytes",
		`{"notebook": {"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [` + md + "," + md + "," + md + `]}}`:           "more than 2 cells, the server's limit; send a smaller notebook or start the server with a higher --max-notebook-cells",
	} {
		req, err := http.NewRequest("POST", url+"/v1/notebooks/run", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", b)
		require.Contains(t, string(b), `"too_large"`)
		require.Contains(t, string(b), want)
	}
}

// TestServeConnCap repeats issue 21 item 4 at a small scale: a flood of idle
// unauthenticated keep-alive connections, more than the process may open, must
// leave room for an authenticated call and /healthz. Under a file limit of 256
// the default --max-conns derives from it; with --max-conns 50 the cap is set.
func TestServeConnCap(t *testing.T) {
	for name, tc := range map[string]struct {
		ulimit int
		args   []string
	}{
		"file limit 256, default cap": {256, nil},
		"--max-conns 50":              {0, []string{"--max-conns", "50"}},
	} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			addr := ln.Addr().String()
			require.NoError(t, ln.Close())
			// Idle connections are not closed during the test: it is the cap that
			// must keep room.
			args := append([]string{"serve", "--listen", addr, "--token", "tok", "--no-dashboard", "--conn-idle-timeout", "10m",
				"--workspace", t.TempDir()}, tc.args...) // not the default .kernelbox in the source tree
			var cmd *exec.Cmd
			if tc.ulimit > 0 {
				lim := strconv.Itoa(tc.ulimit)
				cmd = exec.Command("/bin/sh", append([]string{"-c", "ulimit -Sn " + lim + " && ulimit -Hn " + lim + ` && exec "$0" "$@"`, kernelboxBin(t)}, args...)...)
			} else {
				cmd = exec.Command(kernelboxBin(t), args...)
			}
			log := &lockedBuffer{}
			cmd.Stdout, cmd.Stderr, cmd.Dir = log, log, t.TempDir()
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			url := "http://" + addr
			get := func(path string, token bool) (int, error) {
				req, _ := http.NewRequest("GET", url+path, nil)
				if token {
					req.Header.Set("Authorization", "Bearer tok")
				}
				c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
				resp, err := c.Do(req)
				if err != nil {
					return 0, err
				}
				defer resp.Body.Close()
				_, _ = io.Copy(io.Discard, resp.Body)
				return resp.StatusCode, nil
			}
			require.Eventually(t, func() bool { code, _ := get("/healthz", false); return code == 200 }, 60*time.Second, 50*time.Millisecond, "%s", log)

			// 400 connections that each send one request without the token and
			// then stay open, idle.
			var flood []net.Conn
			t.Cleanup(func() {
				for _, c := range flood {
					_ = c.Close()
				}
			})
			held := 0
			for range 400 {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					continue
				}
				flood = append(flood, c)
				_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
				if _, err := io.WriteString(c, "GET /v1/sessions HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
					continue
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err == nil && resp.StatusCode == http.StatusUnauthorized {
					held++
				}
			}
			t.Logf("%d flood connections held open by the server", held)

			code, err := get("/v1/sessions", true)
			require.NoError(t, err, "an authenticated call during the flood")
			require.Equal(t, http.StatusOK, code)
			code, err = get("/healthz", false)
			require.NoError(t, err, "/healthz during the flood")
			require.Equal(t, http.StatusOK, code)
			code, err = get("/v1/sessions", false)
			if err == nil {
				require.NotEqual(t, http.StatusOK, code)
			}
			require.Less(t, held, 400, "some of the flood was turned away")

			// A silent connection in the reserved slots is closed soon, not after
			// the 10 s header timeout.
			silent, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer silent.Close()
			start := time.Now()
			_ = silent.SetReadDeadline(time.Now().Add(15 * time.Second))
			_, err = silent.Read(make([]byte, 1))
			require.Error(t, err)
			require.Less(t, time.Since(start), 5*time.Second, "%v", err)

			req, _ := http.NewRequest("GET", url+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer tok")
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Contains(t, string(b), "kernelbox_http_connections_open ")
			require.Contains(t, string(b), `kernelbox_gateway_clients{kind="started"} 0`, "the Jupyter gateway's metrics")
			require.Regexp(t, `kernelbox_http_connections_reserve_refused_total [1-9]`, string(b))
		})
	}
}
