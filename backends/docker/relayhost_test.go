package docker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The relay's host side against a relay played by the test (no container): its
// bounds, its readiness and loss, and the idle check of what it hands out.

// relayDial connects to h's socket as the relay would and says kind.
func relayDial(t *testing.T, h *relayHost, kind string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", h.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if kind != "" {
		if _, err := io.WriteString(c, kind); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func newRelayHost(t *testing.T) *relayHost {
	t.Helper()
	dir := t.TempDir()
	h, err := listenRelay(dir, false, 0, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.close)
	fi, err := os.Stat(filepath.Join(dir, relaySocketName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("relay socket: %v %v", fi, err)
	}
	return h
}

func TestRelayHostBounds(t *testing.T) {
	t.Parallel()
	h := newRelayHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Ready once the control connection arrives; a second one is refused.
	relayDial(t, h, "C")
	if err := h.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	second := relayDial(t, h, "C")
	if _, err := second.Read(make([]byte, 1)); err == nil {
		t.Error("a second control connection was kept")
	}

	// Idle connections: at most relayMaxIdle kept; the rest closed and counted.
	for range relayMaxIdle + 5 {
		relayDial(t, h, "P")
	}
	waitFor(t, func() bool { return h.refused.Load() >= 6 }, "refusals counted")
	h.mu.Lock()
	held := len(h.conns)
	h.mu.Unlock()
	if held != relayMaxIdle {
		t.Errorf("held %d idle connections, want %d", held, relayMaxIdle)
	}

	// Junk and silence are refused too.
	relayDial(t, h, "X")
	waitFor(t, func() bool { return h.refused.Load() >= 7 }, "junk refused")
}

// TestRelayHostSkipsDead: a pooled connection the relay closed while idle is not
// handed out; the next live one is.
func TestRelayHostSkipsDead(t *testing.T) {
	t.Parallel()
	h := newRelayHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held := func() int { h.mu.Lock(); defer h.mu.Unlock(); return len(h.conns) }
	dead := relayDial(t, h, "P")
	waitFor(t, func() bool { return held() == 1 }, "first pooled")
	live := relayDial(t, h, "P")
	waitFor(t, func() bool { return held() == 2 }, "second pooled")
	_ = dead.Close()
	time.Sleep(20 * time.Millisecond)
	got, err := h.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if _, err := io.WriteString(got, "GET"); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 3)
	if _, err := io.ReadFull(live, b); err != nil || string(b) != "GET" {
		t.Errorf("the handed-out connection reached %q, %v", b, err)
	}
}

func TestRelayHostGone(t *testing.T) {
	t.Parallel()
	h := newRelayHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// No relay yet: dial waits for ctx.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if _, err := h.dial(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("dial with no relay: %v", err)
	}
	control := relayDial(t, h, "C")
	if err := h.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	_ = control.Close() // the relay killed
	select {
	case <-h.Gone():
	case <-ctx.Done():
		t.Fatal("the relay's end was not seen")
	}
	if _, err := h.dial(ctx); !errors.Is(err, errRelayGone) {
		t.Errorf("dial after the relay's end: %v", err)
	}
	// close is idempotent and does not report a loss of its own.
	h.close()
	h.close()
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
