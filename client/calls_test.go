package client_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// killer is a dialer whose connections the test can cut.
type killer struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (k *killer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err == nil {
		k.mu.Lock()
		k.conns = append(k.conns, c)
		k.mu.Unlock()
	}
	return c, err
}

// kill closes every connection made so far.
func (k *killer) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.conns {
		c.Close()
	}
	k.conns = nil
}

// resumes records the Last-Event-ID of each events request.
type resumes struct {
	mu  sync.Mutex
	ids []string
}

func (r *resumes) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/events") {
			r.mu.Lock()
			r.ids = append(r.ids, req.Header.Get("Last-Event-ID"))
			r.mu.Unlock()
		}
		h.ServeHTTP(w, req)
	})
}

func (r *resumes) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

// twentySeconds prints a numbered line every 100 ms for 20 s.
const twentySeconds = "import time\nfor i in range(200):\n    print(f'line {i:03d}', flush=True)\n    time.sleep(0.1)\n'finished'"

func twentySecondsOutput() string {
	var sb strings.Builder
	for i := range 200 {
		fmt.Fprintf(&sb, "line %03d\n", i)
	}
	return sb.String()
}

// collector gathers stdout events.
type collector struct {
	mu     sync.Mutex
	stdout strings.Builder
	n      int
}

func (c *collector) on(ev api.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.Type == "stream" && ev.Name == "stdout" {
		c.stdout.WriteString(ev.Text)
		c.n++
	}
}

func (c *collector) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stdout.String()
}

// TestConnectionKilledMidCall: the connections of a 20 s streamed call are cut
// halfway (and again later); the client reattaches with Last-Event-ID and gets
// every line once, in order, and the Result. A second client attaching by id
// after the first cut replays the call from the start.
func TestConnectionKilledMidCall(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	te := testexec.Local(t, nil)
	var rs resumes
	srv := httptest.NewServer(rs.wrap(httpapi.New(te.Exec, httpapi.Options{Token: "secret", Workspace: te.WS})))
	t.Cleanup(srv.Close)
	var k killer
	c, err := client.New(srv.URL, &client.Options{Token: "secret", HTTPClient: &http.Client{Transport: &http.Transport{DialContext: k.dial}}})
	require.NoError(t, err)
	other, err := client.New(srv.URL, &client.Options{Token: "secret"})
	require.NoError(t, err)
	ctx := context.Background()

	var first collector
	type answer struct {
		res *api.Result
		err error
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		res, err := c.ExecuteStream(ctx, api.Request{SessionID: "kill", Code: twentySeconds}, first.on)
		done <- answer{res, err}
	}()
	require.Eventually(t, func() bool { return strings.Contains(first.text(), "line 099") }, time.Minute, 10*time.Millisecond)
	k.kill()
	killedAt := time.Since(start)
	calls, err := other.Calls(ctx, "kill")
	require.NoError(t, err)
	require.Len(t, calls, 1)
	assert.Equal(t, api.CallRunning, calls[0].State, "the call goes on without its connection")

	var second collector
	attached := make(chan answer, 1)
	go func() {
		res, err := other.Attach(ctx, calls[0].CallID, second.on)
		attached <- answer{res, err}
	}()
	require.Eventually(t, func() bool { return strings.Contains(first.text(), "line 150") }, time.Minute, 10*time.Millisecond)
	k.kill()

	a := <-done
	require.NoError(t, a.err)
	want := twentySecondsOutput()
	assert.Equal(t, want, first.text(), "every line once, in order, across two cuts")
	assert.Equal(t, api.StatusOK, a.res.Status)
	assert.Equal(t, want, a.res.Stdout)
	assert.Equal(t, "'finished'", a.res.Result)
	b := <-attached
	require.NoError(t, b.err)
	assert.Equal(t, want, second.text(), "the attached client replays from the start")
	assert.Equal(t, a.res, b.res)

	ids := rs.list()
	t.Logf("first cut after %v; %d stdout events to the streaming client; events requests with Last-Event-ID %q", killedAt, first.n, ids)
	require.GreaterOrEqual(t, len(ids), 3, "two reattachments plus the second client's attach")
	resumed := 0
	for _, id := range ids {
		if id != "" {
			resumed++
		}
	}
	assert.GreaterOrEqual(t, resumed, 2, "each reattachment says where it was")
}

func TestCallsAPI(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	c, _, _ := newServer(t)
	ctx := context.Background()
	d, err := c.Start(ctx, api.Request{SessionID: "cs", Code: "import time\nprint('a', flush=True)\ntime.sleep(0.5)\n7"})
	require.NoError(t, err)
	assert.Equal(t, "cs", d.SessionID)
	info, err := c.Call(ctx, d.CallID)
	require.NoError(t, err)
	assert.NotEqual(t, api.CallDone, info.State)
	var col collector
	res, err := c.Attach(ctx, d.CallID, col.on)
	require.NoError(t, err)
	assert.Equal(t, "7", res.Result)
	assert.Equal(t, "a\n", col.text())
	info, err = c.Call(ctx, d.CallID)
	require.NoError(t, err)
	assert.Equal(t, api.CallDone, info.State)
	assert.Equal(t, res, info.Result)
	list, err := c.Calls(ctx, "cs")
	require.NoError(t, err)
	require.Len(t, list, 1)

	assert.ErrorIs(t, c.Cancel(ctx, d.CallID), api.ErrCallFinished)
	_, err = c.Call(ctx, "nope")
	assert.ErrorIs(t, err, api.ErrNotFound)
	_, err = c.Attach(ctx, "nope", nil)
	assert.ErrorIs(t, err, api.ErrNotFound, "a server's answer is not retried")
	_, err = c.Start(ctx, api.Request{SessionID: "bad id", Code: "1"})
	assert.ErrorIs(t, err, api.ErrInvalidRequest)

	d, err = c.Start(ctx, api.Request{SessionID: "cs", Code: "import time\ntime.sleep(60)"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := c.Call(ctx, d.CallID)
		return err == nil && info.State == api.CallRunning
	}, time.Minute, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // let the code start: see calls.TestLocalBackend
	require.NoError(t, c.Cancel(ctx, d.CallID))
	res, err = c.Attach(ctx, d.CallID, nil)
	require.NoError(t, err)
	assert.Equal(t, api.StatusTimeout, res.Status)
}
