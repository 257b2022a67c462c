package jupyter_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/jupyter/jupytertest"
	"github.com/stretchr/testify/require"
)

// Jupyter Server holds a channels handshake open until the kernel answers
// kernel_info; a caller that gives up must not wait for the 30 s handshake timeout.
func TestConnectCancelEndsHeldHandshake(t *testing.T) {
	t.Parallel()
	srv := jupytertest.New(t, nil)
	c := newClient(t, srv.Endpoint())
	k, err := c.StartKernel(testCtx(t), jupyter.StartOptions{})
	require.NoError(t, err)
	srv.Kernel(k.ID).StallHandshakes(true)

	gaveUp := errors.New("the caller gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	time.AfterFunc(100*time.Millisecond, func() { cancel(gaveUp) })
	start := time.Now()
	_, err = c.Connect(ctx, k.ID, nil)
	require.ErrorIs(t, err, gaveUp)
	require.Less(t, time.Since(start), 5*time.Second)

	// Once the server answers again, a new connection works.
	srv.Kernel(k.ID).StallHandshakes(false)
	conn := connect(t, c, k.ID, nil)
	_, err = conn.KernelInfo(testCtx(t))
	require.NoError(t, err)
}

// A context that ends after the handshake leaves the connection alone: nothing the
// dial armed on it touches the socket, so the first WebSocket keeps working and is
// never re-dialled.
func TestConnectContextEndingLaterKeepsConnection(t *testing.T) {
	t.Parallel()
	f := newFake(t, nil, nil, nil)
	// The fake attaches a connection after its upgrade has answered, so f.conn's
	// session may not be counted yet when newFake returns.
	require.Eventually(t, func() bool { return len(f.kernel.Sessions()) == 1 }, 5*time.Second, time.Millisecond)
	before := len(f.kernel.Sessions())
	ctx := newSyncCancelContext()
	conn, err := f.client.Connect(ctx, f.kernel.ID, nil)
	require.NoError(t, err)
	defer conn.Close()
	// Whatever the cancellation triggers in the client has run once cancel returns.
	ctx.cancel()
	_, err = conn.KernelInfo(testCtx(t))
	require.NoError(t, err)
	require.Len(t, f.kernel.Sessions(), before+1, "the connection was re-dialled")
}

// syncCancelContext is a context whose cancel runs the functions registered on it
// with context.AfterFunc (directly or by a derived context) before it returns,
// where a standard context starts each in its own goroutine: a test then knows
// without waiting that they have run.
type syncCancelContext struct {
	context.Context // Background: no deadline, no values

	mu    sync.Mutex
	done  chan struct{}
	err   error
	next  int
	funcs map[int]func()
}

func newSyncCancelContext() *syncCancelContext {
	return &syncCancelContext{Context: context.Background(), done: make(chan struct{}), funcs: map[int]func(){}}
}

func (c *syncCancelContext) Done() <-chan struct{} { return c.done }

func (c *syncCancelContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc is found by context.AfterFunc and by derived contexts, which register
// through it instead of starting a goroutine to watch Done.
func (c *syncCancelContext) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f() // as context.AfterFunc does for a context already done
		return func() bool { return false }
	}
	id := c.next
	c.next++
	c.funcs[id] = f
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, armed := c.funcs[id]
		delete(c.funcs, id)
		return armed
	}
}

// cancel ends the context and runs the functions still registered, in this
// goroutine.
func (c *syncCancelContext) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	close(c.done)
	funcs := c.funcs
	c.funcs = nil
	c.mu.Unlock()
	for _, f := range funcs {
		f()
	}
}

// Errors outside the REST API come as Jupyter Server's HTML pages: the error keeps
// their heading and traceback, not the markup.
func TestHTTPErrorFromHTMLPage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, want string
	}{
		{"404 page", `<!DOCTYPE HTML>
<html><head><title>Jupyter Server</title></head><body>
<div class="error">
    <h1>404 : Not Found</h1>
    <p>You are requesting a page that does not exist!</p>
</div></body></html>`, "404 : Not Found"},
		{"page with traceback", `<html><body><div class="error"><h1>500 :
 Internal Server Error</h1><p>The error was:</p><div class="traceback-wrapper">
<pre class="traceback">Kernel &#39;x&#39; &lt;dead&gt;</pre></div></div></body></html>`,
			"500 : Internal Server Error: Kernel 'x' <dead>"},
		{"JSON", `{"message": "Kernel does not exist: k", "reason": null}`, "Kernel does not exist: k"},
		{"plain text", "gateway says no", "gateway says no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(tt.body))
			}))
			t.Cleanup(hs.Close)
			c := newClient(t, jupyter.Endpoint{URL: hs.URL, Token: "t"})
			_, err := c.Kernel(testCtx(t), "k")
			require.ErrorIs(t, err, jupyter.ErrNotFound)
			var he *jupyter.HTTPError
			require.ErrorAs(t, err, &he)
			require.Equal(t, tt.want, he.Message)
		})
	}
}
