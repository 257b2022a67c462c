package executor_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/jupyter/jupytertest"
	"github.com/kernelbox/kernelbox/workspace"
)

// Issue 33, item 6: a template whose preload hangs must not starve another
// template's warm pool, a preload has a timeout of its own, and start errors name
// their cause.

// waitPreloadRunning waits until some kernel of template tmpl runs its preload (a
// hanging cell) and returns it.
func waitPreloadRunning(t *testing.T, b *fakeBackend, tmpl string) *jupytertest.Kernel {
	t.Helper()
	var k *jupytertest.Kernel
	require.Eventually(t, func() bool {
		for _, p := range b.placements() {
			if p.spec.Template.Name != tmpl || p.isClosed() {
				continue
			}
			for _, ki := range p.srv.Kernels() {
				if kk := p.srv.Kernel(ki.ID); kk != nil && b.script.running(kk) {
					k = kk
					return true
				}
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "no kernel of template %s runs its preload", tmpl)
	return k
}

// A warm start whose preload hangs gives the executor's warm-start turn up after
// WarmTurn: the other template's pool refills while it hangs. Before, the hung start
// held the turn until the start timeout (10 s here).
func TestWarmHungPreloadDoesNotStarveOtherPools(t *testing.T) {
	e, b := newFakeEnv(t, nil, func(o *executor.Options) {
		o.WarmTurn = 200 * time.Millisecond
		o.Templates = []executor.Template{
			{Name: "hang", Preload: "hang", Warm: 1, PreloadTimeout: 8 * time.Second},
			{Name: "good", Preload: "set p good", Warm: 2},
		}
	})
	// The hung preload holds its start from here on.
	waitPreloadRunning(t, b, "hang")
	hungSince := time.Now()
	require.Eventually(t, func() bool { return e.WarmReadyOf("good") == 2 }, 5*time.Second, 10*time.Millisecond,
		"the good template's pool did not fill beside the hung start")
	// Take one: the pool refills while the other template's start still hangs.
	r, err := e.Execute(context.Background(), api.Request{SessionID: "g1", Code: "get p", Template: "good"})
	require.NoError(t, err)
	require.Equal(t, "good", r.Result)
	require.Eventually(t, func() bool { return e.WarmReadyOf("good") == 2 }, 3*time.Second, 10*time.Millisecond,
		"the good template's pool was not refilled while the hung start held on")
	require.Less(t, time.Since(hungSince), 8*time.Second, "the refill came only after the hung start's preload timeout")
	require.Equal(t, 0, e.WarmReadyOf("hang"))
}

// A preload that hangs fails the start after the template's preload timeout, with
// an error naming the template, the bound and what the preload printed, and its
// kernel is stopped. A call's max wait still bounds the call.
func TestPreloadTimeout(t *testing.T) {
	e, b := newFakeEnv(t, nil, func(o *executor.Options) {
		o.StartTimeout = 20 * time.Second
		o.Templates = []executor.Template{{Name: "hang", Preload: "print loading the tables\nhang", PreloadTimeout: 500 * time.Millisecond}}
	})
	ctx := context.Background()
	t0 := time.Now()
	_, err := e.Execute(ctx, api.Request{SessionID: "h1", Code: "print hi", Template: "hang", Timeout: 5 * time.Second})
	took := time.Since(t0)
	require.ErrorIs(t, err, api.ErrBackend)
	var te *executor.PreloadTimeoutError
	require.True(t, errors.As(err, &te), "%v", err)
	require.Equal(t, "hang", te.Template)
	require.Equal(t, 500*time.Millisecond, te.Timeout)
	require.Contains(t, err.Error(), `template "hang": preload timed out after 500ms (the template's preload_timeout); the kernel was stopped`)
	require.Contains(t, err.Error(), "output before it was stopped:\nloading the tables")
	require.Less(t, took, 10*time.Second, "the start waited for more than the preload timeout")
	t.Logf("failed after %s: %v", took.Round(time.Millisecond), err)
	require.Eventually(t, func() bool {
		for _, p := range b.placements() {
			if !p.isClosed() {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "the kernel whose preload timed out was not stopped")

	// The call's max wait ends the call sooner, with a note that its code did not run.
	e2, _ := newFakeEnv(t, nil, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "hang", Preload: "hang", PreloadTimeout: 8 * time.Second}}
	})
	t0 = time.Now()
	r, err := e2.Execute(ctx, api.Request{SessionID: "h2", Code: "print hi", Template: "hang", MaxWait: 300 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, api.StatusTimeout, r.Status, "%+v", r.Error)
	require.Contains(t, r.Error.Evalue, "max wait of 300ms passed while the session's kernel started")
	require.Less(t, time.Since(t0), 5*time.Second)
}

// hangingOpens is a fakeBackend whose Open waits for its context to end.
type hangingOpens struct{ *fakeBackend }

func (b *hangingOpens) Open(ctx context.Context, _ executor.SessionSpec) (executor.Placement, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A start that runs out of the start timeout says so, instead of a bare "context
// deadline exceeded" from whichever step was under way.
func TestStartTimeoutNamed(t *testing.T) {
	e := newEnvOn(t, &hangingOpens{newFakeBackend(t)}, func(o *executor.Options) {
		o.StartTimeout = time.Second
	})
	_, err := e.Execute(context.Background(), api.Request{SessionID: "s", Code: "print hi"})
	require.ErrorIs(t, err, api.ErrBackend)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "the kernel start ran out of time after 1")
	require.Contains(t, err.Error(), "bounded by the start timeout, 1s,")
}

// diagnosing is a fakeBackend whose placements are Diagnosers (with a fixed cause)
// and Adopters (recording the sessions they are given).
type diagnosing struct {
	*fakeBackend
	cause string

	mu      sync.Mutex
	adopted map[string]string // the placement's SessionSpec.ID -> the session that took it
	warm    map[string]bool   // SessionSpec.ID -> SessionSpec.Warm
}

func (b *diagnosing) Open(ctx context.Context, spec executor.SessionSpec) (executor.Placement, error) {
	p, err := b.fakeBackend.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.warm[spec.ID] = spec.Warm
	b.mu.Unlock()
	return &diagnosingPlacement{Placement: p, b: b, id: spec.ID}, nil
}

type diagnosingPlacement struct {
	executor.Placement
	b  *diagnosing
	id string
}

func (p *diagnosingPlacement) Diagnose(context.Context) string { return p.b.cause }

func (p *diagnosingPlacement) Adopt(_ context.Context, session string) error {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	p.b.adopted[p.id] = session
	return nil
}

func newDiagnosing(t *testing.T, cause string) *diagnosing {
	return &diagnosing{fakeBackend: newFakeBackend(t), cause: cause, adopted: map[string]string{}, warm: map[string]bool{}}
}

// A kernel that dies while it runs the preload fails the start with the cause its
// placement knows (docker's: an OOM kill and the memory limit), not a bare "kernel
// died".
func TestPreloadKernelDeathDiagnosed(t *testing.T) {
	b := newDiagnosing(t, "kernel was OOM-killed (memory limit 256 MiB)")
	e := newEnvOn(t, b, func(o *executor.Options) {
		o.StartTimeout = 10 * time.Second
		o.Templates = []executor.Template{{Name: "small", Preload: "print allocating\ndie"}}
	})
	_, err := e.Execute(context.Background(), api.Request{SessionID: "s", Code: "print hi", Template: "small"})
	require.ErrorIs(t, err, api.ErrBackend)
	require.Contains(t, err.Error(), `template "small": the kernel died while it ran the preload: kernel was OOM-killed (memory limit 256 MiB)`)
	require.ErrorIs(t, err, jupyter.ErrKernelDied)

	// A placement that knows no cause: the connection's own words, and the usual
	// causes.
	e2 := newEnvOn(t, newDiagnosing(t, ""), func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "small", Preload: "die"}}
	})
	_, err = e2.Execute(context.Background(), api.Request{SessionID: "s", Code: "print hi", Template: "small"})
	require.ErrorIs(t, err, api.ErrBackend)
	require.Contains(t, err.Error(), `template "small": the kernel died while it ran the preload: kernel died (the server is restarting it; its state is lost); no cause known (common causes: os._exit, a crash in native code, running out of memory)`)
}

// A warm kernel's placement is told the session that takes it (Adopter), before that
// session's first call returns; a placement opened for a session is not.
func TestWarmPlacementAdopted(t *testing.T) {
	b := newDiagnosing(t, "")
	e := newEnvOn(t, b, func(o *executor.Options) {
		o.StartTimeout = 10 * time.Second
		o.Templates = []executor.Template{{Name: "pooled", Warm: 1}}
	})
	require.Eventually(t, func() bool { return e.WarmReadyOf("pooled") == 1 }, 10*time.Second, 10*time.Millisecond)
	r, err := e.Execute(context.Background(), api.Request{SessionID: "taker", Code: "print hi", Template: "pooled"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status)
	e.run(t, "cold", "print hi")
	b.mu.Lock()
	defer b.mu.Unlock()
	var warmIDs []string
	for id, warm := range b.warm {
		if warm {
			warmIDs = append(warmIDs, id)
			require.True(t, strings.HasPrefix(id, ".warm-"), id)
		}
	}
	require.NotEmpty(t, warmIDs)
	require.False(t, b.warm["cold"], "a session's own placement is not a warm one")
	require.Equal(t, "taker", b.adopted[warmIDs[0]], "adopted: %v", b.adopted)
	require.NotContains(t, b.adopted, "cold")
}

// newFakeWorkspace is a workspace of its own for executors a test builds itself.
func newFakeWorkspace(t *testing.T) *workspace.Manager {
	t.Helper()
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(t.TempDir(), "ws")})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	return ws
}

// Preload timeouts are checked in New: not negative, shorter than the start timeout.
func TestPreloadTimeoutChecked(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(*executor.Options)
		want string
	}{
		{"template at the start timeout", func(o *executor.Options) {
			o.StartTimeout = time.Minute
			o.Templates = []executor.Template{{Name: "slow", Preload: "x", PreloadTimeout: time.Minute}}
		}, `template "slow": preload_timeout 1m0s is not shorter than the start timeout (1m0s)`},
		{"template negative", func(o *executor.Options) {
			o.Templates = []executor.Template{{Name: "neg", PreloadTimeout: -time.Second}}
		}, `template "neg": preload_timeout must not be negative`},
		{"server's over the start timeout", func(o *executor.Options) {
			o.StartTimeout, o.PreloadTimeout = time.Minute, 2*time.Minute
		}, "Options.PreloadTimeout is 2m0s; it must be positive and shorter than StartTimeout (1m0s)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := executor.Options{Backend: newFakeBackend(t), Workspace: newFakeWorkspace(t)}
			tt.mod(&o)
			_, err := executor.New(o)
			require.ErrorContains(t, err, tt.want)
		})
	}
	// The defaults: 60 s, or half a start timeout under 2 minutes; a template that
	// sets none gets the server's.
	for _, tt := range []struct {
		start, want time.Duration
	}{{0, executor.DefaultPreloadTimeout}, {10 * time.Second, 5 * time.Second}} {
		o := executor.Options{Backend: newFakeBackend(t), Workspace: newFakeWorkspace(t), StartTimeout: tt.start,
			Templates: []executor.Template{{Name: "p", Preload: "x"}, {Name: "q", Preload: "x", PreloadTimeout: 2 * time.Second}}}
		e, err := executor.New(o)
		require.NoError(t, err)
		got := map[string]time.Duration{}
		for _, tm := range e.Templates() {
			got[tm.Name] = tm.PreloadTimeout
		}
		require.Equal(t, tt.want, got["p"])
		require.Equal(t, 2*time.Second, got["q"])
		for _, info := range e.TemplateInfos() {
			if info.Name == "q" {
				require.Equal(t, 2.0, info.PreloadTimeoutSeconds)
			}
		}
		require.NoError(t, e.Close())
	}
}
