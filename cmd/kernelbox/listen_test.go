package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/client"
)

// racerEnv makes the test binary, started with it set to a socket path, a
// client of that socket instead of a test run (see init): the other uid of
// issue 33 item 4's tests.
const racerEnv = "KERNELBOX_TEST_UNIX_RACER"

func init() {
	if path := os.Getenv(racerEnv); path != "" {
		unixRacer(path, os.Getenv(racerEnv+"_ONCE") != "")
		os.Exit(0)
	}
}

// racerReport is what a racer saw.
type racerReport struct {
	Attempts  int         `json:"attempts"`
	Connected int         `json:"connected"`     // connect(2) succeeded
	Answers   map[int]int `json:"answers"`       // HTTP status -> count
	Closed    int         `json:"closed"`        // connected, but no answer
	Errors    []string    `json:"errors"`        // why the connects failed, one each
	FirstOK   string      `json:"first_ok_body"` // body of the first 200
}

// unixRacer connects to path as fast as it can, each time asking
// GET /v1/sessions, until its stdin closes (or once), and prints a racerReport.
func unixRacer(path string, once bool) {
	var mu sync.Mutex
	rep := racerReport{Answers: map[int]int{}}
	seen := map[string]bool{}
	try := func() {
		c, err := net.Dial("unix", path)
		mu.Lock()
		rep.Attempts++
		if err != nil {
			if msg := errnoName(err); !seen[msg] {
				seen[msg] = true
				rep.Errors = append(rep.Errors, msg)
			}
			mu.Unlock()
			return
		}
		rep.Connected++
		mu.Unlock()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = io.WriteString(c, "GET /v1/sessions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
		var resp *http.Response
		if err == nil {
			resp, err = http.ReadResponse(bufio.NewReader(c), nil)
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			rep.Closed++
			return
		}
		rep.Answers[resp.StatusCode]++
		if resp.StatusCode == http.StatusOK && rep.FirstOK == "" {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
			rep.FirstOK = string(b)
		}
	}
	if once {
		try()
	} else {
		stop := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stop) }()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						try()
					}
				}
			})
		}
		wg.Wait()
	}
	_ = json.NewEncoder(os.Stdout).Encode(rep)
}

func errnoName(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// sharedTestBin copies this test binary where uid 65534 can run it.
func sharedTestBin(t testing.TB) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "kernelbox-racer-bin")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	b, err := os.ReadFile(self)
	require.NoError(t, err)
	bin := filepath.Join(dir, "racer")
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	return bin
}

// racer is a unixRacer process running as uid and gid 65534, with no
// supplementary groups.
type racer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   strings.Builder
}

func startRacer(t testing.TB, bin, path string, once bool) *racer {
	t.Helper()
	r := &racer{cmd: exec.Command(bin)}
	r.cmd.Env = []string{racerEnv + "=" + path}
	if once {
		r.cmd.Env = append(r.cmd.Env, racerEnv+"_ONCE=1")
	}
	r.cmd.Dir = "/"
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	r.cmd.Stdout = &r.out
	r.cmd.Stderr = os.Stderr
	var err error
	r.stdin, err = r.cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, r.cmd.Start())
	t.Cleanup(func() { _ = r.cmd.Process.Kill(); _ = r.cmd.Wait() })
	return r
}

// finish stops the racer and returns its report.
func (r *racer) finish(t testing.TB) racerReport {
	t.Helper()
	_ = r.stdin.Close()
	require.NoError(t, r.cmd.Wait())
	var rep racerReport
	require.NoError(t, json.Unmarshal([]byte(r.out.String()), &rep), "%s", r.out.String())
	return rep
}

// openDir makes a directory everyone may enter and write in, as /tmp.
func openDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kernelbox-sock")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o1777))
	return dir
}

// serveUnix starts `kernelbox serve --listen unix:sock` (backend none) under
// umask 000, waits until it answers its owner, and returns it; stop ends it.
func serveUnix(t testing.TB, sock string) (stop func(), log *lockedBuffer) {
	t.Helper()
	log = &lockedBuffer{}
	cmd := exec.Command("/bin/sh", "-c", `umask 000 && exec "$0" "$@"`, kernelboxBin(t),
		"serve", "--listen", "unix:"+sock, "--no-dashboard", "--workspace", filepath.Join(t.TempDir(), "ws"))
	cmd.Dir = t.TempDir()
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	t.Cleanup(stop)
	c, err := client.New("unix:"+sock, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.Sessions(ctx)
		return err == nil
	}, 60*time.Second, 5*time.Millisecond, "serve did not answer on %s:\n%s", sock, log)
	return stop, log
}

// TestServeUnixStartRace is issue 33 item 4: under umask 000, uid 65534
// connecting as fast as it can to the path of a tokenless unix socket while
// `kernelbox serve` starts there, 20 times, gets no answer: before, it got
// GET /v1/sessions -> 200 in most starts (the socket was 0777 until chmodded).
func TestServeUnixStartRace(t *testing.T) {
	requireRoot(t)
	bin := sharedTestBin(t)
	sock := filepath.Join(openDir(t), "kb.sock")
	r := startRacer(t, bin, sock, false)
	for i := range 20 {
		stop, log := serveUnix(t, sock)
		fi, err := os.Lstat(sock)
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o600), fi.Mode().Perm(), "start %d", i)
		time.Sleep(50 * time.Millisecond) // the racer also tries the started server
		stop()
		_, err = os.Lstat(sock)
		require.ErrorIs(t, err, fs.ErrNotExist, "serve removes its socket at exit:\n%s", log)
		entries, err := os.ReadDir(filepath.Dir(sock))
		require.NoError(t, err)
		require.Empty(t, entries, "nothing is left beside the socket")
	}
	rep := r.finish(t)
	t.Logf("uid 65534: %d attempts, %d connected, answers %v, %d closed unanswered; errors %v",
		rep.Attempts, rep.Connected, rep.Answers, rep.Closed, rep.Errors)
	require.Greater(t, rep.Attempts, 1000, "the racer raced")
	require.Empty(t, rep.Answers, "another uid got answers (first 200: %s)", rep.FirstOK)
}

// TestServeUnixPeerCred: with the socket's mode loosened to 0777 after the
// start, uid 65534 can connect, but the peer check closes the connection
// before any answer; the serving uid is still served, and the refusal is logged.
func TestServeUnixPeerCred(t *testing.T) {
	requireRoot(t)
	bin := sharedTestBin(t)
	sock := filepath.Join(openDir(t), "kb.sock")
	_, log := serveUnix(t, sock)
	require.NoError(t, os.Chmod(sock, 0o777))

	r := startRacer(t, bin, sock, true)
	rep := r.finish(t)
	t.Logf("uid 65534 on a 0777 socket: %+v", rep)
	require.Equal(t, 1, rep.Connected, "the 0777 socket lets it connect: %v", rep.Errors)
	require.Empty(t, rep.Answers, "another uid got an answer (%s)", rep.FirstOK)
	require.Equal(t, 1, rep.Closed)
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "peer_uid=65534") }, 10*time.Second, 20*time.Millisecond,
		"the refusal is logged:\n%s", log)

	c, err := client.New("unix:"+sock, nil)
	require.NoError(t, err)
	_, err = c.Sessions(context.Background())
	require.NoError(t, err, "the serving uid is still served")
}

// TestListenUnix: the socket is 0600 at its path whatever the umask's effect
// on the bind, nothing is left beside it, a path too long for sockaddr_un still
// works, a regular file is not replaced, and remove leaves a socket that is
// not its own.
func TestListenUnix(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	t.Run("private", func(t *testing.T) {
		dir := t.TempDir()
		sock := filepath.Join(dir, "k.sock")
		require.NoError(t, os.WriteFile(filepath.Join(dir, "unrelated"), nil, 0o644))
		// A socket left by a server that died is replaced.
		old, err := net.Listen("unix", sock)
		require.NoError(t, err)
		old.(*net.UnixListener).SetUnlinkOnClose(false)
		require.NoError(t, old.Close())
		ln, remove, err := listenUnix(sock, log)
		require.NoError(t, err)
		defer ln.Close()
		fi, err := os.Lstat(sock)
		require.NoError(t, err)
		assert.Equal(t, fs.ModeSocket|0o600, fi.Mode())
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 2, "the socket and the unrelated file only")
		serveOnce(t, ln, sock)
		remove()
		_, err = os.Lstat(sock)
		require.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("long path", func(t *testing.T) {
		dir := t.TempDir()
		for len(dir) < 100 {
			dir = filepath.Join(dir, strings.Repeat("d", 20))
		}
		require.NoError(t, os.MkdirAll(dir, 0o700))
		sock := filepath.Join(dir, "k.sock")
		ln, remove, err := listenUnix(sock, log)
		require.NoError(t, err, "%d bytes", len(sock))
		defer remove()
		defer ln.Close()
		fi, err := os.Lstat(sock)
		require.NoError(t, err)
		assert.Equal(t, fs.ModeSocket|0o600, fi.Mode())
		// A path this long cannot be dialled either: dial it through its directory.
		d, err := os.Open(dir)
		require.NoError(t, err)
		defer d.Close()
		serveOnce(t, ln, "/proc/self/fd/"+strconv.Itoa(int(d.Fd()))+"/k.sock")
	})
	t.Run("not a socket", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "notes.txt")
		require.NoError(t, os.WriteFile(path, []byte("keep"), 0o644))
		_, _, err := listenUnix(path, log)
		require.ErrorContains(t, err, "there is a regular file there, not a socket")
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, "keep", string(b))
		entries, err := os.ReadDir(filepath.Dir(path))
		require.NoError(t, err)
		require.Len(t, entries, 1)
	})
	t.Run("remove leaves another socket", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "k.sock")
		ln, remove, err := listenUnix(sock, log)
		require.NoError(t, err)
		defer ln.Close()
		ln2, remove2, err := listenUnix(sock, log) // a second server took the path
		require.NoError(t, err)
		defer ln2.Close()
		remove()
		_, err = os.Lstat(sock)
		require.NoError(t, err, "the first server's exit keeps the second's socket")
		remove2()
		_, err = os.Lstat(sock)
		require.ErrorIs(t, err, fs.ErrNotExist)
	})
}

// serveOnce accepts one connection on ln, dialled at addr, and checks that the
// peer check lets the same uid through.
func serveOnce(t *testing.T, ln net.Listener, addr string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, err = io.WriteString(c, "hello")
			c.Close()
		}
		done <- err
	}()
	c, err := net.Dial("unix", addr)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Equal(t, "hello", string(b))
	require.NoError(t, <-done)
}
