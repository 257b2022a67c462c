package remote

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/kernelfs"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	require.Equal(t, "https://h:1/p", redact("https://user:pw@h:1/p/?token=x#f"))
	require.Equal(t, "http://[::1", redact("http://[::1"))
	require.NotContains(t, redact("http://u:secret@[::1?token=secret"), "secret")
}

func TestTLSConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := Options{CACertFile: filepath.Join(dir, "missing.pem")}
	_, err := o.tlsConfig()
	require.ErrorContains(t, err, "gateway CA file")
	bad := filepath.Join(dir, "bad.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not a certificate"), 0o644))
	o.CACertFile = bad
	_, err = o.tlsConfig()
	require.ErrorContains(t, err, "no PEM certificate")
	o.CACertFile = ""
	cfg, err := o.tlsConfig()
	require.NoError(t, err)
	require.Nil(t, cfg, "Go's defaults")
}

// fakeGateway answers GET /api and /api/kernels like a Jupyter server, or fails
// when down is set.
type fakeGateway struct {
	*httptest.Server
	down    atomic.Bool
	kernels atomic.Int32
	hits    atomic.Int32
	// hold, while set, holds GET /api until it is closed or the request ends.
	hold atomic.Pointer[chan struct{}]
}

func newFakeGateway(t *testing.T) *fakeGateway {
	f := &fakeGateway{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		if f.down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		switch r.URL.Path {
		case "/api":
			if h := f.hold.Load(); h != nil {
				select {
				case <-*h:
				case <-r.Context().Done():
					return
				}
			}
			_, _ = w.Write([]byte(`{"version":"1.23.3"}`))
		case "/api/kernels":
			ks := make([]map[string]string, f.kernels.Load())
			_ = json.NewEncoder(w).Encode(ks)
		case "/api/kernelspecs":
			_, _ = w.Write([]byte(`{"default":"python3","kernelspecs":{"python3":{"name":"python3","spec":{}}}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func TestHealthAndLoad(t *testing.T) {
	a, b := newFakeGateway(t), newFakeGateway(t)
	be, err := New(context.Background(), Options{
		Gateways:       []Gateway{{URL: a.URL}, {URL: b.URL}},
		HealthInterval: 20 * time.Millisecond,
	})
	require.NoError(t, err)
	defer be.Close(context.Background())
	open := func() *Placement {
		p, err := be.Open(context.Background(), executor.SessionSpec{ID: "s", Dir: t.TempDir()})
		require.NoError(t, err)
		return p.(*Placement)
	}
	waitKernels := func(i, n int) {
		require.Eventually(t, func() bool { return be.Gateways()[i].ServerKernels == n }, 5*time.Second, 5*time.Millisecond)
	}

	// Other clients' kernels count: a has 3, so sessions go to b until it has more.
	a.kernels.Store(3)
	waitKernels(0, 3)
	p1, p2, p3 := open(), open(), open()
	require.Equal(t, b.URL, p1.Gateway())
	require.Equal(t, b.URL, p2.Gateway())
	require.Equal(t, b.URL, p3.Gateway())
	require.Equal(t, a.URL, open().Gateway(), "b has 3 of ours, a 3 of others': the first wins ties")
	require.NoError(t, p3.Close(context.Background()))
	require.NoError(t, p3.Close(context.Background()), "closing twice is fine")
	require.Equal(t, b.URL, open().Gateway())

	// One failed check is not enough to leave the rotation; two are.
	b.down.Store(true)
	require.Eventually(t, func() bool { return !be.Gateways()[1].Healthy }, 5*time.Second, 5*time.Millisecond)
	st := be.Gateways()[1]
	require.Contains(t, st.Error, "502")
	require.Contains(t, p1.lostReason(), "unreachable", "its sessions were told")
	require.Equal(t, a.URL, open().Gateway(), "new sessions avoid the unhealthy gateway")
	require.Contains(t, p1.Diagnose(context.Background()), "is unreachable")
	require.NoError(t, be.Health(context.Background()))

	// Both down: Open and Health fail with ErrNoGateway and say why.
	a.down.Store(true)
	require.Eventually(t, func() bool { return !be.Gateways()[0].Healthy }, 5*time.Second, 5*time.Millisecond)
	_, err = be.Open(context.Background(), executor.SessionSpec{ID: "s", Dir: t.TempDir()})
	require.ErrorIs(t, err, ErrNoGateway)
	require.ErrorContains(t, err, "502")
	require.ErrorIs(t, be.Health(context.Background()), ErrNoGateway)

	// Back: in the rotation again.
	a.down.Store(false)
	b.down.Store(false)
	require.Eventually(t, func() bool { return be.Gateways()[0].Healthy && be.Gateways()[1].Healthy }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, "", p1.Diagnose(context.Background()))
}

func TestOpenSkipsAGatewayThatJustDied(t *testing.T) {
	a, b := newFakeGateway(t), newFakeGateway(t)
	be, err := New(context.Background(), Options{
		Gateways:       []Gateway{{URL: a.URL}, {URL: b.URL}},
		HealthInterval: time.Hour, // no checks: only Open's own look
		UnhealthyAfter: 1,
	})
	require.NoError(t, err)
	defer be.Close(context.Background())
	a.down.Store(true)
	p, err := be.Open(context.Background(), executor.SessionSpec{ID: "s", Dir: t.TempDir()})
	require.NoError(t, err)
	require.Equal(t, b.URL, p.(*Placement).Gateway())
	require.False(t, be.Gateways()[0].Healthy)
	require.Equal(t, 0, be.Gateways()[0].Sessions)
}

func TestCloseStopsChecks(t *testing.T) {
	a := newFakeGateway(t)
	be, err := New(context.Background(), Options{Gateways: []Gateway{{URL: a.URL}}, HealthInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, be.Close(context.Background()))
	n := a.hits.Load()
	time.Sleep(200 * time.Millisecond)
	// A check Close cancelled may still reach the server after Close returned (the
	// request was already on the wire); checks still running would add ~20.
	require.LessOrEqual(t, a.hits.Load()-n, int32(1), "health checks go on after Close")
	_, err = be.Open(context.Background(), executor.SessionSpec{ID: "s", Dir: t.TempDir()})
	require.ErrorContains(t, err, "closed")
	require.NoError(t, be.Close(context.Background()), "closing twice is fine")
}

// TestCloseWaitsForAnOpen: Close (and Detach) shut the gate an Open passes: an
// Open whose gateway probe is in flight is cancelled and waited for, fails with
// ErrClosed, and leaves no placement or reservation on the gateway, even if
// the gateway answers right after.
func TestCloseWaitsForAnOpen(t *testing.T) {
	t.Parallel()
	a := newFakeGateway(t)
	be, err := New(context.Background(), Options{Gateways: []Gateway{{URL: a.URL}}, HealthInterval: time.Hour})
	require.NoError(t, err)
	hold := make(chan struct{})
	a.hold.Store(&hold)
	before := a.hits.Load()
	opened := make(chan error, 1)
	go func() {
		_, err := be.Open(context.Background(), executor.SessionSpec{ID: "s", Dir: t.TempDir()})
		opened <- err
	}()
	require.Eventually(t, func() bool { return a.hits.Load() > before }, 5*time.Second, 5*time.Millisecond, "the Open's probe reached the gateway")
	require.NoError(t, be.Close(context.Background()))
	close(hold) // the gateway answers now: too late
	select {
	case err = <-opened:
	case <-time.After(5 * time.Second):
		t.Fatal("the Open did not end")
	}
	require.ErrorIs(t, err, ErrClosed)
	st := be.Gateways()[0]
	require.Equal(t, 0, st.Sessions, "no placement after Close")
	require.Empty(t, be.placementList())
	g := be.gateways[0]
	g.mu.Lock()
	reserved := g.reserved
	g.mu.Unlock()
	require.Zero(t, reserved, "the Open's reservation is given back")
}

func TestTokenErrors(t *testing.T) {
	t.Parallel()
	var he = &jupyter.HTTPError{Method: "GET", Path: "/api/kernels", StatusCode: 403, Message: "Forbidden"}
	err := tokenError("http://g", he)
	require.ErrorIs(t, err, ErrTokenRejected)
	require.ErrorContains(t, err, "403 Forbidden")
	require.Nil(t, tokenError("http://g", &jupyter.HTTPError{StatusCode: 500}))
}

func TestRecordNeedsConsecutiveFailures(t *testing.T) {
	t.Parallel()
	g := &gateway{healthy: true, placements: map[*Placement]struct{}{}}
	p := &Placement{}
	g.placements[p] = struct{}{}
	boom := errors.New("boom")
	lost, changed := g.record(0, boom, 2)
	require.False(t, changed)
	require.Empty(t, lost)
	require.True(t, g.healthy, "one failure is not enough")
	_, changed = g.record(4, nil, 2)
	require.False(t, changed)
	require.Equal(t, 4, g.serverKernels)
	g.record(0, boom, 2)
	lost, changed = g.record(0, boom, 2)
	require.True(t, changed)
	require.Equal(t, []*Placement{p}, lost)
	require.False(t, g.healthy)
	require.Equal(t, boom, g.lastErr)
	lost, changed = g.record(0, boom, 2)
	require.False(t, changed)
	require.Empty(t, lost, "sessions are given up once")
	_, changed = g.record(1, nil, 2)
	require.True(t, changed)
	require.True(t, g.healthy)
}

func TestUnreachableAtStartJoinsLater(t *testing.T) {
	a, b := newFakeGateway(t), newFakeGateway(t)
	b.down.Store(true)
	be, err := New(context.Background(), Options{Gateways: []Gateway{{URL: a.URL}, {URL: b.URL}}, HealthInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	defer be.Close(context.Background())
	require.False(t, be.Gateways()[1].Healthy, "out of the rotation from the start")
	b.down.Store(false)
	require.Eventually(t, func() bool { return be.Gateways()[1].Healthy }, 5*time.Second, 5*time.Millisecond)
}

// TestLostGatewaySignalsThePlacement: a gateway leaving the rotation closes its
// placements' Lost channels (once, however often it is reported); their sync calls
// then fail with the reason, which Diagnose gives too. The placement holds no
// connection to close.
func TestLostGatewaySignalsThePlacement(t *testing.T) {
	a := newFakeGateway(t)
	be, err := New(context.Background(), Options{
		Gateways:       []Gateway{{URL: a.URL}},
		HealthInterval: time.Hour, // checks are driven by hand
		UnhealthyAfter: 1,
	})
	require.NoError(t, err)
	defer be.Close(context.Background())
	pl, err := be.Open(context.Background(), executor.SessionSpec{ID: "s", Dir: t.TempDir()})
	require.NoError(t, err)
	p := pl.(*Placement)
	select {
	case <-p.Lost():
		t.Fatal("Lost is closed while the gateway is healthy")
	default:
	}
	require.Empty(t, p.Diagnose(context.Background()), "no kernel seen yet: nothing to say")

	be.recordCheck(be.gateways[0], 0, errors.New("gateway g is unreachable: boom"), 1)
	be.recordCheck(be.gateways[0], 0, errors.New("still down"), 1)
	select {
	case <-p.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost was not closed when the gateway left the rotation")
	}
	p.lose("again") // a second report changes nothing
	require.Equal(t, "gateway g is unreachable: boom", p.lostReason())
	err = p.PushInputs(context.Background(), nil, t.TempDir(), nil)
	require.EqualError(t, err, "gateway g is unreachable: boom")
	err = p.PullOutputs(context.Background(), nil, t.TempDir(), nil)
	require.EqualError(t, err, "gateway g is unreachable: boom")
	require.Equal(t, "gateway g is unreachable: boom", p.Diagnose(context.Background()), "the gateway answers again but is out of the rotation")
	a.down.Store(true)
	require.Contains(t, p.Diagnose(context.Background()), "is unreachable")
}

// Options.Sync reaches each placement's kernelfs as it is, but for what is the
// backend's: the kernel path, the uploader (Transfer) and the logger; its abort
// timeout defaults to the health timeout.
func TestSyncOptions(t *testing.T) {
	t.Parallel()
	g := newFakeGateway(t)
	given := kernelfs.Options{RemoteDir: "/scratch", ReapAfter: time.Minute, MaxSessionBytes: 7, ChunkBytes: 2 << 20,
		Window: 5, KernelPath: "elsewhere", Logger: slog.Default()}
	open := func(o Options) (*Backend, kernelfs.Options) {
		o.Gateways, o.HealthInterval = []Gateway{{URL: g.URL}}, time.Hour
		be, err := New(context.Background(), o)
		require.NoError(t, err)
		t.Cleanup(func() { be.Close(context.Background()) })
		return be, be.syncOptions(be.gateways[0])
	}
	be, got := open(Options{Sync: given, KernelPath: "work", HealthTimeout: 3 * time.Second, Transfer: TransferContents})
	require.Equal(t, "/scratch", got.RemoteDir)
	require.Equal(t, time.Minute, got.ReapAfter)
	require.Equal(t, int64(7), got.MaxSessionBytes)
	require.Equal(t, 2<<20, got.ChunkBytes)
	require.Equal(t, 5, got.Window)
	require.Equal(t, 3*time.Second, got.AbortTimeout, "defaults to the health timeout")
	require.Equal(t, "work", got.KernelPath, "the server's kernel path")
	require.Same(t, be.gateways[0].files, got.Uploader, "contents transfer: the gateway's client")
	require.NotSame(t, given.Logger, got.Logger, "the backend's logger, with the gateway")

	given.Uploader, given.AbortTimeout = be.gateways[0].files, time.Second
	_, got = open(Options{Sync: given})
	require.Nil(t, got.Uploader, "auto transfer goes through the kernel")
	require.Equal(t, time.Second, got.AbortTimeout)
}

func TestSyncOptionsRefused(t *testing.T) {
	t.Parallel()
	for want, sync := range map[string]kernelfs.Options{"chunk size": {ChunkBytes: 6<<20 + 1}, "NUL": {RemoteDir: "a\x00b"}} {
		_, err := New(context.Background(), Options{Gateways: []Gateway{{URL: "http://127.0.0.1:1"}}, Sync: sync})
		require.ErrorContains(t, err, want)
	}
}
