package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
)

// How the readiness wait polls: the socket file often, the container's state less
// often (each inspect is a daemon round trip), so that a server that dies at start is
// reported at once instead of after the whole ready timeout.
const (
	pollSocket    = 20 * time.Millisecond
	pollContainer = 250 * time.Millisecond
	probeTimeout  = 2 * time.Second
	logTailLines  = 20
)

// errExited is the cause in a StartError when the container stopped during start.
var errExited = errors.New("container exited before its Jupyter server was ready")

// socketHTTPClient returns an HTTP client whose every connection dials the unix socket
// at sock.
func socketHTTPClient(sock string) *http.Client {
	var d net.Dialer
	return &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "unix", sock)
			},
			DisableKeepAlives: true,
		},
	}
}

// probe asks the server at sock for GET /api with token and reports an error unless
// it answers 200.
func probe(ctx context.Context, hc *http.Client, token string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	// The host must be a loopback name: Jupyter Server refuses others with 403.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost/api", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "token "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /api: %s", resp.Status)
	}
	return nil
}

// waitReady waits until the server in container id answers on its socket, the
// container stops, or the ready timeout (or ctx) ends. It returns the container's
// main pid, which locates its cgroup, and the server's socket pinned by
// pinServerSocket. The container is inspected and the socket probed at least once
// however short the timeout.
func (b *Backend) waitReady(ctx context.Context, id, token string) (pid int, sock *os.File, err error) {
	deadline := time.Now().Add(b.cfg.readyTimeout)
	tick := time.NewTicker(pollSocket)
	defer tick.Stop()
	var (
		lastErr     = errors.New("socket not created yet")
		nextInspect time.Time
	)
	for {
		if now := time.Now(); !now.Before(nextInspect) {
			r, err := b.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
			if err != nil {
				return 0, nil, fmt.Errorf("inspect container: %w", err)
			}
			st := r.Container.State
			if st == nil || !st.Running {
				return 0, nil, errExited
			}
			pid = st.Pid
			nextInspect = now.Add(pollContainer)
		}
		if pid > 0 {
			var f *os.File
			if f, lastErr = pinServerSocket(pid); lastErr == nil {
				hc := socketHTTPClient(fdPath(f))
				lastErr = probe(ctx, hc, token)
				hc.CloseIdleConnections()
				if lastErr == nil {
					return pid, f, nil
				}
				_ = f.Close()
			}
		}
		if time.Now().After(deadline) {
			return 0, nil, fmt.Errorf("jupyter server not ready after %s: %v", b.cfg.readyTimeout, lastErr)
		}
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// pinServerSocket opens (O_PATH) the server's socket inside the container whose
// main process is pid, through that process's root directory. The socket lives on
// the container's /tmp tmpfs, so no host directory that the kernel could write
// backs it; and kernelbox dials the open file (fdPath), not a path, so code in the
// container can neither remove the socket from under kernelbox nor swap it for a
// symlink to another socket: connect(2) on the descriptor reaches the inode the
// server bound. It is called before any kernel - any untrusted code - exists, when
// only the image's own server has run in the container.
func pinServerSocket(pid int) (*os.File, error) {
	p := "/proc/" + strconv.Itoa(pid) + "/root" + containerSocket
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("pin socket: %w", &os.PathError{Op: "open", Path: p, Err: err})
	}
	f := os.NewFile(uintptr(fd), p)
	fi, err := f.Stat()
	if err == nil && fi.Mode().Type() != os.ModeSocket {
		err = fmt.Errorf("%s is not a socket (%s)", containerSocket, fi.Mode().Type())
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("pin socket: %w", err)
	}
	return f, nil
}

// fdPath is the path that connects to the socket pinned as f: the process's own
// descriptor link, which connect(2) follows to the socket's inode.
func fdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// startError describes a container whose server did not become ready: its state and
// last log lines, read under a fresh context because ctx may be what ended the wait.
func (b *Backend) startError(id, name string, cause error) *StartError {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e := &StartError{Kind: sandbox.KindContainer, Name: name, Err: cause}
	if r, err := b.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err == nil && r.Container.State != nil {
		st := r.Container.State
		e.Running, e.ExitCode, e.OOMKilled = st.Running, st.ExitCode, st.OOMKilled
	}
	e.Logs = b.lastLogs(ctx, id, logTailLines)
	return e
}

// lastLogs returns the container's last n log lines, or a line saying why they could
// not be read.
func (b *Backend) lastLogs(ctx context.Context, id string, n int) []string {
	rc, err := b.api.ContainerLogs(ctx, id, client.ContainerLogsOptions{
		ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(n),
	})
	return sandbox.LogLines(rc, err, n)
}
