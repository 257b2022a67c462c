package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/workspace"
)

// binDir holds the kernelbox binary the tests build once, in TestMain.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kernelbox-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildErr  error
)

// kernelboxBin builds this command (once per test run) and returns its path.
func kernelboxBin(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(binDir, "kernelbox")
	buildOnce.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return bin
}

// testDirs returns a workspace and a working directory (the policy's ${workdir},
// where inputs may come from) for one kernelbox process.
func testDirs(t testing.TB) (ws, data string) {
	t.Helper()
	root := t.TempDir()
	ws, data = filepath.Join(root, "ws"), filepath.Join(root, "data")
	require.NoError(t, os.MkdirAll(data, 0o755))
	// A server killed with SIGKILL leaves its session disks mounted, as it
	// leaves containers; the next start on the workspace unmounts them, and so
	// does this, before the temporary directory is removed.
	t.Cleanup(func() {
		if _, err := os.Stat(ws); err != nil {
			return
		}
		if m, err := workspace.New(workspace.Options{Root: ws, DiskQuota: defaultDiskQuota}); err == nil {
			m.Close()
		}
	})
	return ws, data
}

// lockedBuffer collects a child's stderr for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// server is a `kernelbox serve` child process on a loopback port.
type server struct {
	URL   string
	Token string
	Data  string
	Pid   int // the serve process
	log   *lockedBuffer
}

// serveOpts says how startServeWith runs `kernelbox serve`.
type serveOpts struct {
	// token is given as --token; "" starts serve without one, as the quick start
	// does, with XDG_RUNTIME_DIR set to runtimeDir so the test finds the token it
	// makes (server.Token, "" when serve kept none).
	token      string
	runtimeDir string
	args       []string // more flags for serve
	// backend replaces "--backend local --python PY" (e.g. remote and its gateway).
	backend []string
	env     []string // more environment for serve
}

// startServe runs `kernelbox serve --backend local` with a token and waits until it
// answers /healthz. The process is stopped with SIGTERM at cleanup and must exit
// cleanly.
func startServe(t testing.TB) *server {
	t.Helper()
	return startServeWith(t, serveOpts{token: "test-token-123"})
}

// startServeWith is startServe as o says.
func startServeWith(t testing.TB, o serveOpts) *server {
	t.Helper()
	backend := o.backend
	if backend == nil {
		backend = []string{"--backend", "local", "--python", testenv.Jupyter(t)}
	}
	bin := kernelboxBin(t)
	ws, data := testDirs(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	s := &server{URL: "http://" + addr, Token: o.token, Data: data, log: &lockedBuffer{}}
	// --on-stop close: the cleanup's SIGTERM leaves nothing behind (tests of
	// the other policies say so in o.args, whose last --on-stop wins).
	args := append(append([]string{"serve"}, backend...), "--workspace", ws, "--workdir", data,
		"--listen", addr, "--log-level", "debug", "--on-stop", "close")
	if o.token != "" {
		args = append(args, "--token", o.token)
	}
	args = append(args, o.args...)
	cmd := exec.Command(bin, args...)
	if o.runtimeDir != "" || o.env != nil {
		cmd.Env = append(os.Environ(), o.env...)
		if o.runtimeDir != "" {
			cmd.Env = append(cmd.Env, "XDG_RUNTIME_DIR="+o.runtimeDir)
		}
	}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	require.NoError(t, cmd.Start())
	s.Pid = cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("kernelbox serve exited with %v; its log:\n%s", err, s.log)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("kernelbox serve did not exit after SIGTERM; its log:\n%s", s.log)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if o.token == "" && o.runtimeDir != "" {
					s.Token = runtimeToken(t, o.runtimeDir, s.URL)
				}
				return s
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("kernelbox serve exited early (%v):\n%s", err, s.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("kernelbox serve did not become healthy:\n%s", s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runtimeToken reads the token a tokenless serve recorded for url under the
// runtime dir dir, or "" when it recorded none. It reads the files itself rather
// than through the client, so that it works on any version of serve.
func runtimeToken(t testing.TB, dir, url string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "kernelbox", "server-*.json"))
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var info struct{ URL, Token string }
		require.NoError(t, json.Unmarshal(b, &info), "%s", f)
		if info.URL == url {
			return info.Token
		}
	}
	return ""
}

// get fetches path with the server's token (or none) and returns status and body.
func (s *server) get(t testing.TB, path string, withToken bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	require.NoError(t, err)
	if withToken {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
