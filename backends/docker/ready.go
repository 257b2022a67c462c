package docker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
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

// waitReady waits until the server in container id answers on sock, the container
// stops, or the ready timeout (or ctx) ends. It returns the container's main pid,
// which locates its cgroup. The container is inspected and the socket probed at least
// once however short the timeout.
func (b *Backend) waitReady(ctx context.Context, id, sock, token string) (pid int, err error) {
	deadline := time.Now().Add(b.cfg.readyTimeout)
	hc := socketHTTPClient(sock)
	defer hc.CloseIdleConnections()

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
				return 0, fmt.Errorf("inspect container: %w", err)
			}
			st := r.Container.State
			if st == nil || !st.Running {
				return 0, errExited
			}
			pid = st.Pid
			nextInspect = now.Add(pollContainer)
		}
		if _, err := os.Stat(sock); err == nil {
			if lastErr = probe(ctx, hc, token); lastErr == nil {
				return pid, nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("jupyter server not ready after %s: %v", b.cfg.readyTimeout, lastErr)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
}

// startError describes a container whose server did not become ready: its state and
// last log lines, read under a fresh context because ctx may be what ended the wait.
func (b *Backend) startError(id, name string, cause error) *StartError {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e := &StartError{Container: name, Err: cause}
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
	if err != nil {
		return []string{"(logs unavailable: " + err.Error() + ")"}
	}
	defer rc.Close()
	var buf bytes.Buffer
	// Both streams into one buffer keeps their order, which is what a reader wants.
	if _, err := stdcopy.StdCopy(&buf, &buf, io.LimitReader(rc, 1<<20)); err != nil {
		return []string{"(logs unreadable: " + err.Error() + ")"}
	}
	var lines []string
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if l := strings.TrimRight(sc.Text(), "\r"); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
