package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/jupyter/jupytertest"
)

// fakeBackend is an in-process executor.Backend for the executor's state-machine
// tests: each placement is its own jupytertest server (a fake Jupyter Server) whose
// kernels run fakeScript, so no Python is needed. Placements may also be
// LossReporters and Diagnosers (lossy) or FileSyncers (syncing).
type fakeBackend struct {
	t      testing.TB
	script *fakeScript
	lossy  bool // placements report loss (LossReporter) and its reason (Diagnoser)
	sync   bool // placements are FileSyncers
	dirs   bool // placements are SessionDirers: their kernels can hibernate
	// closeDelay is how long a placement's Close takes, as a real kernel's
	// shutdown does (a few hundred ms on local, seconds on docker).
	closeDelay time.Duration
	// openDelay is how long Open takes (a container's start).
	openDelay time.Duration
	// handler, when set, answers the kernels' messages instead of script.
	handler jupytertest.Handler

	mu      sync.Mutex
	placed  []*fakePlacement
	syncing map[*fakePlacement]*syncingPlacement // what Open returned for them
	openErr error                                // returned by Open while set
	closed  bool
}

var _ executor.Backend = (*fakeBackend)(nil)

func newFakeBackend(t testing.TB) *fakeBackend {
	return &fakeBackend{t: t, script: newFakeScript()}
}

func (b *fakeBackend) Name() string { return "fake" }

// Open starts a fake server for the session.
func (b *fakeBackend) Open(ctx context.Context, spec executor.SessionSpec) (executor.Placement, error) {
	b.mu.Lock()
	delay := b.openDelay
	b.mu.Unlock()
	time.Sleep(delay)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openErr != nil {
		return nil, b.openErr
	}
	if b.closed {
		return nil, errors.New("fake backend: closed")
	}
	handler := b.script.handle
	if b.handler != nil {
		handler = b.handler
	}
	p := &fakePlacement{
		spec:       spec,
		closeDelay: b.closeDelay,
		srv: jupytertest.New(b.t, &jupytertest.Options{
			Handler:     handler,
			OnInterrupt: b.script.interrupt,
		}),
		lost: make(chan struct{}),
	}
	b.placed = append(b.placed, p)
	switch {
	case b.lossy:
		return &lossyPlacement{p}, nil
	case b.dirs:
		return &dirPlacement{p}, nil
	case b.sync:
		sp := &syncingPlacement{fakePlacement: p}
		if b.syncing == nil {
			b.syncing = map[*fakePlacement]*syncingPlacement{}
		}
		b.syncing[p] = sp
		return sp, nil
	}
	return p, nil
}

// Close closes the servers of every placement.
func (b *fakeBackend) Close(context.Context) error {
	b.mu.Lock()
	b.closed = true
	placed := slices.Clone(b.placed)
	b.mu.Unlock()
	for _, p := range placed {
		p.srv.Close()
	}
	b.script.stop()
	return nil
}

// placements returns the placements opened so far, in order.
func (b *fakeBackend) placements() []*fakePlacement {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.placed)
}

// setOpenErr makes Open fail with err (nil: succeed again).
func (b *fakeBackend) setOpenErr(err error) {
	b.mu.Lock()
	b.openErr = err
	b.mu.Unlock()
}

// placementOf returns the placement whose server runs kernel id, or nil.
func (b *fakeBackend) placementOf(id string) *fakePlacement {
	for _, p := range b.placements() {
		if p.srv.Kernel(id) != nil {
			return p
		}
	}
	return nil
}

// kernelOf returns the fake kernel with id, or nil.
func (b *fakeBackend) kernelOf(id string) *jupytertest.Kernel {
	if p := b.placementOf(id); p != nil {
		return p.srv.Kernel(id)
	}
	return nil
}

// fakePlacement is one session's fake server.
type fakePlacement struct {
	spec       executor.SessionSpec
	srv        *jupytertest.Server
	closeDelay time.Duration

	mu       sync.Mutex
	closed   bool
	lost     chan struct{}
	lostOnce sync.Once
	why      string
}

func (p *fakePlacement) Server() executor.Server {
	return executor.Server{Endpoint: p.srv.Endpoint()}
}

func (p *fakePlacement) Close(context.Context) error {
	time.Sleep(p.closeDelay)
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.srv.Close()
	return nil
}

func (p *fakePlacement) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// lose closes the placement's Lost channel (for lossy placements) with a reason.
func (p *fakePlacement) lose(why string) {
	p.lostOnce.Do(func() {
		p.mu.Lock()
		p.why = why
		p.mu.Unlock()
		close(p.lost)
	})
}

// lossyPlacement is a placement whose server can be lost for good.
type lossyPlacement struct{ *fakePlacement }

func (p *lossyPlacement) Lost() <-chan struct{} { return p.lost }

func (p *lossyPlacement) Diagnose(context.Context) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.why
}

// syncingPlacement is a placement whose kernel does not see the session directory:
// it records what the executor asks of it, and PullOutputs writes a file into the
// host's outputs/ for every probe result it is given.
type syncingPlacement struct {
	*fakePlacement

	smu    sync.Mutex
	pushes [][]string        // names of each PushInputs
	probes []json.RawMessage // probe of each PullOutputs
}

func (p *syncingPlacement) PushInputs(_ context.Context, conn *jupyter.Conn, hostDir string, names []string) error {
	if conn == nil {
		return errors.New("PushInputs: no connection")
	}
	p.smu.Lock()
	defer p.smu.Unlock()
	p.pushes = append(p.pushes, slices.Clone(names))
	return nil
}

func (p *syncingPlacement) OutputsProbe() string { return fakeProbeExpr }

func (p *syncingPlacement) PullOutputs(_ context.Context, conn *jupyter.Conn, hostDir string, probe json.RawMessage) error {
	if conn == nil {
		return errors.New("PullOutputs: no connection")
	}
	p.smu.Lock()
	p.probes = append(p.probes, probe)
	n := len(p.probes)
	p.smu.Unlock()
	if probe == nil {
		return nil
	}
	name := filepath.Join(hostDir, "outputs", "pulled.txt")
	return os.WriteFile(name, []byte{byte('0' + n%10)}, 0o644)
}

func (p *syncingPlacement) record() ([][]string, []json.RawMessage) {
	p.smu.Lock()
	defer p.smu.Unlock()
	return slices.Clone(p.pushes), slices.Clone(p.probes)
}

// fakeProbeExpr is the syncing placement's outputs probe; fakeScript answers it.
const fakeProbeExpr = "fake_outputs_probe()"

// KernelFiles: the fake placement has no kernel to hold files; the files API
// tests use real remote and swarm kernels (backends/internal/kernelfiles).
func (p *syncingPlacement) KernelFiles(*jupyter.Conn, executor.FileLimits) (executor.SessionFiles, error) {
	return nil, errors.New("the fake placement keeps no files in its kernel")
}
