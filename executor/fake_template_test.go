package executor_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/workspace"
)

// A session keeps the template it was created with: its preload ran, a call naming
// another template is refused with both names, an unknown template is invalid.
func TestTemplateKeptAndMismatch(t *testing.T) {
	e, b := newFakeEnv(t, nil, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "analyst", Preload: "set p preloaded"}}
	})
	ctx := context.Background()
	r, err := e.Execute(ctx, api.Request{SessionID: "s1", Code: "get p", Template: "analyst"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "preloaded", r.Result)
	require.Equal(t, 1, r.ExecutionCount, "the preload is silent: the first call is In [1]")
	require.Equal(t, "analyst", b.placements()[0].spec.Template.Name)

	info, err := e.Session("s1")
	require.NoError(t, err)
	require.Equal(t, "analyst", info.Template)

	// Naming no template, or its own, runs in the session.
	r = e.run(t, "s1", "get p")
	require.Equal(t, "preloaded", r.Result)
	_, err = e.Execute(ctx, api.Request{SessionID: "s1", Code: "get p", Template: "analyst"})
	require.NoError(t, err)

	_, err = e.Execute(ctx, api.Request{SessionID: "s1", Code: "get p", Template: "default"})
	require.ErrorIs(t, err, api.ErrTemplateMismatch)
	require.ErrorContains(t, err, `"analyst"`)
	require.ErrorContains(t, err, `"default"`)

	// A default session has no preload.
	r = e.run(t, "s2", "get p")
	require.Equal(t, api.StatusError, r.Status)
	_, err = e.Execute(ctx, api.Request{SessionID: "s2", Code: "get p", Template: "analyst"})
	require.ErrorIs(t, err, api.ErrTemplateMismatch)

	_, err = e.Execute(ctx, api.Request{SessionID: "s3", Code: "get p", Template: "nope"})
	require.ErrorIs(t, err, api.ErrInvalidRequest)
	require.ErrorContains(t, err, `unknown template "nope"`)
	require.ErrorContains(t, err, "analyst, default")
}

// CreateSession fixes the template before the first call.
func TestCreateSessionTemplate(t *testing.T) {
	e, _ := newFakeEnv(t, nil, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "analyst", Preload: "set p 1"}}
	})
	ctx := context.Background()
	info, err := e.CreateSession(ctx, "c1", "analyst")
	require.NoError(t, err)
	require.Equal(t, "analyst", info.Template)
	require.Equal(t, "new", string(info.State))
	_, err = e.CreateSession(ctx, "c1", "analyst")
	require.NoError(t, err, "creating it again with its own template is idempotent")
	_, err = e.CreateSession(ctx, "c1", "default")
	require.ErrorIs(t, err, api.ErrTemplateMismatch)
	r := e.run(t, "c1", "get p")
	require.Equal(t, "1", r.Result)
	_, err = e.CreateSession(ctx, "bad id", "")
	require.ErrorIs(t, err, api.ErrInvalidRequest)
	_, err = e.CreateSession(ctx, "c2", "")
	require.NoError(t, err)
	info, err = e.Session("c2")
	require.NoError(t, err)
	require.Equal(t, api.DefaultTemplateName, info.Template)
}

// A preload that raises fails the kernel's start with the error and its traceback.
func TestTemplatePreloadFails(t *testing.T) {
	e, b := newFakeEnv(t, nil, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "broken", Preload: "print loading\nraise"}}
	})
	_, err := e.Execute(context.Background(), api.Request{SessionID: "p1", Code: "get p", Template: "broken"})
	require.ErrorIs(t, err, api.ErrBackend)
	var pe *executor.PreloadError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, "broken", pe.Template)
	require.Equal(t, "ValueError", pe.Ename)
	require.Contains(t, err.Error(), `template "broken": the preload cell failed`)
	require.Contains(t, err.Error(), "traceback:\nValueError: raised by the script", "the traceback, without ANSI colours")
	require.Contains(t, err.Error(), "loading")
	// The kernel it failed in was not kept.
	require.Eventually(t, func() bool {
		for _, p := range b.placements() {
			if !p.isClosed() {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond)
}

// A reset gives the session a fresh kernel of the same template: its preload runs
// again.
func TestResetKeepsTemplate(t *testing.T) {
	e, _ := newFakeEnv(t, nil, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "analyst", Preload: "set p 1"}}
	})
	ctx := context.Background()
	_, err := e.Execute(ctx, api.Request{SessionID: "r1", Code: "set p 2", Template: "analyst"})
	require.NoError(t, err)
	require.Equal(t, "2", e.run(t, "r1", "get p").Result)
	require.NoError(t, e.ResetSession(ctx, "r1"))
	require.Equal(t, "1", e.run(t, "r1", "get p").Result)
	info, err := e.Session("r1")
	require.NoError(t, err)
	require.Equal(t, "analyst", info.Template)
}

// Each template has its own warm pool; a warm kernel is past its preload.
func TestTemplateWarmPool(t *testing.T) {
	e, b := newFakeEnv(t, nil, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "analyst", Preload: "set p warm", Warm: 1}}
	})
	require.Eventually(t, func() bool { return e.WarmReadyOf("analyst") == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 0, e.WarmReadyOf(api.DefaultTemplateName))
	require.Len(t, b.placements(), 1)
	r, err := e.Execute(context.Background(), api.Request{SessionID: "w1", Code: "get p", Template: "analyst"})
	require.NoError(t, err)
	require.Equal(t, "warm", r.Result, "the warm kernel ran its preload before it was handed out")
	info, err := e.Session("w1")
	require.NoError(t, err)
	require.Equal(t, b.placements()[0].srv.Kernels()[0].ID, info.KernelID, "the session got the warm kernel")
	require.Eventually(t, func() bool { return e.WarmReadyOf("analyst") == 1 }, 10*time.Second, 10*time.Millisecond)
	// A default session starts its own kernel, not the analyst's warm one.
	e.run(t, "d1", "print hi")
	require.Equal(t, 1, e.WarmReadyOf("analyst"))
}

// Warm refills wait while calls run: a kernel start (with its preload's imports)
// never competes with a live call for CPU.
func TestWarmRefillWaitsForCalls(t *testing.T) {
	e, b := newFakeEnv(t, nil, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "analyst", Preload: "set p warm", Warm: 1}}
	})
	require.Eventually(t, func() bool { return e.WarmReadyOf("analyst") == 1 }, 10*time.Second, 10*time.Millisecond)
	ctx := context.Background()
	busy := e.start(t, ctx, api.Request{SessionID: "busy", Code: "sleep 3s"})
	// Busy with its kernel: a session is busy from the moment its call is taken,
	// before it opens its own placement, which must not be counted as a refill.
	require.Eventually(t, func() bool {
		i, err := e.Session("busy")
		return err == nil && i.State == "busy" && i.KernelID != ""
	}, 10*time.Second, 10*time.Millisecond)
	opened := len(b.placements())
	r, err := e.Execute(ctx, api.Request{SessionID: "w1", Code: "get p", Template: "analyst"})
	require.NoError(t, err)
	require.Equal(t, "warm", r.Result)
	// While "busy" runs, the pool stays empty: no placement is opened.
	require.Never(t, func() bool { return len(b.placements()) > opened }, time.Second, 20*time.Millisecond)
	require.Equal(t, 0, e.WarmReadyOf("analyst"))
	_, err = busy.wait(t)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.WarmReadyOf("analyst") == 1 }, 10*time.Second, 10*time.Millisecond)
}

// A template setting a field the backend does not apply is refused by New.
func TestTemplateFieldBackendCannotApply(t *testing.T) {
	ws, err := workspace.New(workspace.Options{Root: filepath.Join(t.TempDir(), "ws")})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	for _, tt := range []struct {
		tmpl  executor.Template
		field string
	}{
		{executor.Template{Name: "big", Memory: 1 << 30}, "memory"},
		{executor.Template{Name: "img", Image: "other:latest"}, "image"},
		{executor.Template{Name: "r", Kernel: "ir"}, "kernel"},
		{executor.Template{Name: "c", CPUs: 1}, "cpus"},
		{executor.Template{Name: "g", Runtime: "runsc"}, "runtime"},
	} {
		_, err := executor.New(executor.Options{Backend: newFakeBackend(t), Workspace: ws, Templates: []executor.Template{tt.tmpl}})
		require.ErrorContains(t, err, `template "`+tt.tmpl.Name+`": field `+tt.field+`: the fake backend cannot apply it`)
	}
	for _, bad := range [][]executor.Template{
		{{Name: ""}},
		{{Name: "a"}, {Name: "a"}},
		{{Name: "a", Env: map[string]string{"HOME": "/"}}},
		{{Name: "a", Env: map[string]string{"1X": "y"}}},
		{{Name: "a", Warm: -1}},
	} {
		_, err := executor.New(executor.Options{Backend: newFakeBackend(t), Workspace: ws, Templates: bad})
		require.Error(t, err, "%+v", bad)
	}
}

// slowOpens is a fakeBackend whose Opens take delay, and which records when each
// began and how many ran at once.
type slowOpens struct {
	*fakeBackend
	delay time.Duration

	mu      sync.Mutex
	opening int
	most    int
	began   []time.Time
}

func (b *slowOpens) Open(ctx context.Context, spec executor.SessionSpec) (executor.Placement, error) {
	b.mu.Lock()
	b.opening++
	b.most = max(b.most, b.opening)
	b.began = append(b.began, time.Now())
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.opening--
		b.mu.Unlock()
	}()
	time.Sleep(b.delay)
	return b.fakeBackend.Open(ctx, spec)
}

// Warm refills start one kernel at a time for the whole executor, whichever its
// template: two templates' pools of two never start two kernels at once, and the
// next start begins only after the previous one's preload has finished.
func TestWarmRefillOneAtATime(t *testing.T) {
	const openDelay, preload = 100 * time.Millisecond, 200 * time.Millisecond
	b := &slowOpens{fakeBackend: newFakeBackend(t), delay: openDelay}
	e := newEnvOn(t, b, func(o *executor.Options) {
		o.StartTimeout = 10 * time.Second
		o.Templates = []executor.Template{
			{Name: "a", Preload: "set p a\nsleep " + preload.String(), Warm: 2},
			{Name: "b", Preload: "set p b\nsleep " + preload.String(), Warm: 2},
		}
	})
	require.Eventually(t, func() bool { return e.WarmReadyOf("a") == 2 && e.WarmReadyOf("b") == 2 }, 30*time.Second, 10*time.Millisecond)
	b.mu.Lock()
	most, began := b.most, slices.Clone(b.began)
	b.mu.Unlock()
	require.Equal(t, 1, most, "two warm kernels were opened at once")
	require.Len(t, began, 4)
	for i := 1; i < len(began); i++ {
		require.GreaterOrEqual(t, began[i].Sub(began[i-1]), openDelay+preload,
			"start %d began before start %d's open and preload were done", i+1, i)
	}
	// The kernels are each their template's, past its preload.
	for _, tmpl := range []string{"a", "b"} {
		r, err := e.Execute(context.Background(), api.Request{SessionID: "s-" + tmpl, Code: "get p", Template: tmpl})
		require.NoError(t, err)
		require.Equal(t, tmpl, r.Result)
	}
}
