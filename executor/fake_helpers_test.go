package executor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter/jupytertest"
)

// newFakeEnv is an executor on a fakeBackend (no Python), with short grace periods.
// setup, if not nil, configures the backend before the executor is built; mod the
// executor's options.
func newFakeEnv(t *testing.T, setup func(*fakeBackend), mod func(*executor.Options)) (*env, *fakeBackend) {
	t.Helper()
	b := newFakeBackend(t)
	if setup != nil {
		setup(b)
	}
	e := newEnvOn(t, b, func(o *executor.Options) {
		o.InterruptGrace = 300 * time.Millisecond
		o.StartTimeout = 10 * time.Second
		o.ShutdownTimeout = 5 * time.Second
		o.DefaultTimeout = 20 * time.Second
		if mod != nil {
			mod(o)
		}
	})
	return e, b
}

// kernel returns the fake kernel of session id.
func (e *env) fakeKernel(t *testing.T, b *fakeBackend, id string) *jupytertest.Kernel {
	t.Helper()
	info, err := e.Session(id)
	require.NoError(t, err)
	k := b.kernelOf(info.KernelID)
	require.NotNil(t, k, "session %s: kernel %q", id, info.KernelID)
	return k
}

// call is one Execute running in the background.
type call struct {
	res    *api.Result
	err    error
	done   chan struct{}
	events chan api.Event
}

// start runs req in the background, recording its events; the test waits for it
// (wait) before it ends.
func (e *env) start(t *testing.T, ctx context.Context, req api.Request) *call {
	t.Helper()
	c := &call{done: make(chan struct{}), events: make(chan api.Event, 100)}
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(wg.Wait)
	go func() {
		defer wg.Done()
		defer close(c.done)
		c.res, c.err = e.ExecuteStream(ctx, req, func(ev api.Event) {
			select {
			case c.events <- ev:
			default:
			}
		})
	}()
	return c
}

// wait returns the call's outcome, failing t if it takes over 15 s.
func (c *call) wait(t *testing.T) (*api.Result, error) {
	t.Helper()
	select {
	case <-c.done:
		return c.res, c.err
	case <-time.After(15 * time.Second):
		t.Fatal("the call did not return within 15 s")
		return nil, nil
	}
}

// pending fails t if the call has returned.
func (c *call) pending(t *testing.T) {
	t.Helper()
	select {
	case <-c.done:
		t.Fatalf("the call returned early: %+v, %v", c.res, c.err)
	default:
	}
}

// waitEvent waits for a status event with the given state.
func (c *call) waitStatus(t *testing.T, state string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-c.events:
			if ev.Type == "status" && ev.State == state {
				return
			}
		case <-c.done:
			for {
				select {
				case ev := <-c.events:
					if ev.Type == "status" && ev.State == state {
						return
					}
					continue
				default:
				}
				break
			}
			t.Fatalf("the call returned before status %q: %+v, %v", state, c.res, c.err)
		case <-deadline:
			t.Fatalf("no status %q within 10 s", state)
		}
	}
}

// waitCell waits until the kernel of session id runs a sleeping or hanging cell,
// and returns that kernel.
func waitCell(t *testing.T, e *env, b *fakeBackend, id string) *jupytertest.Kernel {
	t.Helper()
	var k *jupytertest.Kernel
	require.Eventually(t, func() bool {
		info, err := e.Session(id)
		if err != nil || info.KernelID == "" {
			return false
		}
		k = b.kernelOf(info.KernelID)
		return k != nil && b.script.running(k)
	}, 10*time.Second, 5*time.Millisecond, "session %s never ran its cell", id)
	return k
}

func req(id, code string) api.Request {
	return api.Request{SessionID: id, Code: code}
}
