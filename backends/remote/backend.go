package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/backends/internal/keep"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/kernelfs"
)

// Backend places sessions on existing Jupyter servers. It is safe for concurrent
// use.
type Backend struct {
	opts     Options
	log      *slog.Logger
	gateways []*gateway

	// life is the backend's own lifetime (not a caller's context): Close cancels
	// it, which stops the health checks.
	life    context.Context
	stopAll context.CancelFunc
	wg      sync.WaitGroup

	mu sync.Mutex // guards the choice of a gateway
	// gate is shut by Close and Detach: no session is placed after, and an
	// Open in flight is waited for (keep.Open).
	gate keep.Gate

	kept      keep.Kept[[]keptKernel] // read by New, taken by Reattach
	keptFile  keep.Writes
	stateLock *os.File // held while the backend runs (keep.Lock)
}

var (
	_ executor.Backend       = (*Backend)(nil)
	_ executor.HealthChecker = (*Backend)(nil)
	_ executor.SpecApplier   = (*Backend)(nil)
	_ executor.SpecExplainer = (*Backend)(nil)
)

// New checks the gateways and returns a backend that places sessions on them.
//
// With Options.StateFile set, New takes the file's lock (ErrStateInUse while
// another backend holds it) and reads it for Reattach.
//
// Every URL must parse, and every gateway that answers must accept the token (a
// 401 or 403 fails New with ErrTokenRejected) and offer Options.KernelName. A
// gateway that does not answer does not fail New as long as another one does: it
// starts out of the rotation and joins when a health check passes. When none
// answers, New fails with ErrNoGateway. ctx bounds the checks.
func New(ctx context.Context, opts Options) (*Backend, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("remote backend: %w", err)
	}
	tlsCfg, err := opts.tlsConfig()
	if err != nil {
		return nil, fmt.Errorf("remote backend: %w", err)
	}
	b := &Backend{opts: opts, log: opts.Logger}
	for _, gc := range opts.Gateways {
		ep := jupyter.Endpoint{URL: strings.TrimSuffix(gc.URL, "/"), Token: gc.Token, TLS: tlsCfg}
		c, err := jupyter.NewClient(ep, &jupyter.ClientOptions{Timeout: opts.HealthTimeout, Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("remote backend: %w", err)
		}
		files, err := jupyter.NewClient(ep, &jupyter.ClientOptions{Timeout: uploadTimeout, Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("remote backend: %w", err)
		}
		b.gateways = append(b.gateways, &gateway{
			url: ep.URL, name: redact(gc.URL), ep: ep, client: c, files: files,
			placements: map[*Placement]struct{}{},
		})
	}
	if b.stateLock, err = keep.Lock(opts.StateFile); err != nil {
		b.closeIdle()
		return nil, fmt.Errorf("remote backend: %w", err)
	}
	if err := b.checkAll(ctx); err != nil {
		b.closeIdle()
		keep.Unlock(b.stateLock)
		return nil, fmt.Errorf("remote backend: %w", err)
	}
	kept, skipped, err := readKept(opts.StateFile)
	b.kept.Set(kept, err)
	for _, why := range skipped {
		b.log.Warn("state file: a record is not taken back", "file", opts.StateFile, "reason", why)
	}
	b.life, b.stopAll = context.WithCancel(context.Background())
	for _, g := range b.gateways {
		b.wg.Add(1)
		go b.watch(g)
	}
	return b, nil
}

// checkAll runs the start-up checks on every gateway at once.
func (b *Backend) checkAll(ctx context.Context) error {
	errs := make([]error, len(b.gateways))
	var wg sync.WaitGroup
	for i, g := range b.gateways {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, b.opts.HealthTimeout)
			defer cancel()
			n, err := g.probe(cctx)
			if err == nil {
				err = b.checkKernelSpec(cctx, g)
			}
			g.record(n, err, 1)
			errs[i] = err
		})
	}
	wg.Wait()
	var down []error
	for i, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, ErrTokenRejected), errors.Is(err, errNoKernelSpec):
			return err
		default:
			b.log.Warn("gateway unreachable at start; it joins the rotation when a health check passes", "gateway", b.gateways[i].name, "err", err)
			down = append(down, err)
		}
	}
	if len(down) == len(b.gateways) {
		return fmt.Errorf("%w: %w", ErrNoGateway, errors.Join(down...))
	}
	return nil
}

// errNoKernelSpec: the gateway has no usable kernelspec of Options.KernelName (none of
// that name, or one of another language than Python). It is the executor's sentinel,
// so callers branch on one error whichever layer found the kernel unusable.
var errNoKernelSpec = executor.ErrKernelUnavailable

// checkKernelSpec checks that the gateway offers the configured kernelspec.
func (b *Backend) checkKernelSpec(ctx context.Context, g *gateway) error {
	ks, err := g.client.KernelSpecs(ctx)
	if err != nil {
		if authErr := tokenError(g.name, err); authErr != nil {
			return authErr
		}
		return g.unreachable(err)
	}
	if b.opts.KernelName == "" {
		return nil
	}
	if spec, ok := ks.KernelSpecs[b.opts.KernelName]; ok {
		// Files move through the kernel as Python code (kernelfs): a kernel of
		// another language (R's "ir", say) would fail every call.
		if lang := spec.Spec.Language; lang != "" && !strings.EqualFold(lang, "python") {
			return fmt.Errorf("%w: gateway %s's kernelspec %q is %s; the remote backend moves files through the kernel with Python code, so it runs Python kernels only", errNoKernelSpec, g.name, b.opts.KernelName, lang)
		}
		return nil
	}
	names := make([]string, 0, len(ks.KernelSpecs))
	for n := range ks.KernelSpecs {
		names = append(names, n)
	}
	return fmt.Errorf("%w: gateway %s has no kernelspec %q (it offers: %s)", errNoKernelSpec, g.name, b.opts.KernelName, strings.Join(names, ", "))
}

// Name returns "remote".
func (b *Backend) Name() string { return "remote" }

// SyncsFiles reports true: kernels on a gateway see their files only through the
// kernel's file sync (kernelfs), so the session files API goes through the kernel
// for this backend's sessions (Placement.KernelFiles) instead of the host session
// directory, which the kernel never sees.
func (b *Backend) SyncsFiles() bool { return true }

// Applies reports that the remote backend applies a template's kernel: a
// session starts its template's kernelspec on its gateway (see newPlacement),
// and the executor refuses one whose kernel_info is not Python
// (ErrKernelUnavailable) before any call runs in it, since files move through
// the kernel as Python code. Images and limits are the gateway's own.
func (b *Backend) Applies() executor.SpecFields { return executor.SpecFields{Kernel: true} }

// WhyNot says why this backend cannot apply a template's network allowlist: the
// gateway's network is its operator's.
func (b *Backend) WhyNot(field string) string {
	if field == "network" {
		return "kernelbox has no say over a gateway's network"
	}
	return ""
}

// Gateways returns a snapshot of every gateway, in configuration order.
func (b *Backend) Gateways() []GatewayStatus {
	out := make([]GatewayStatus, len(b.gateways))
	for i, g := range b.gateways {
		out[i] = g.status()
	}
	return out
}

// ErrClosed is returned (wrapped) by Open once Close or Detach has begun.
var ErrClosed = errors.New("remote backend is closed")

// Open places a session on the least-loaded healthy gateway that answers now. The
// kernel itself is started by the executor. It passes the backend's gate: Close
// and Detach wait for an Open in flight (its gateway's probe is cancelled, and
// it fails with ErrClosed), so that what they list is every placement there is.
func (b *Backend) Open(ctx context.Context, spec executor.SessionSpec) (executor.Placement, error) {
	return keep.Open(ctx, &b.gate, ErrClosed, spec.ID, func(ctx context.Context) (executor.Placement, error) {
		return b.open(ctx, spec)
	})
}

// open is Open inside the gate.
func (b *Backend) open(ctx context.Context, spec executor.SessionSpec) (executor.Placement, error) {
	tried := map[*gateway]bool{}
	var errs []error
	for {
		g, err := b.pick(tried)
		if err != nil {
			return nil, errors.Join(append([]error{err}, errs...)...)
		}
		tried[g] = true
		// A quick look before committing: a gateway that died since its last check
		// would otherwise fail the session's start.
		cctx, cancel := context.WithTimeout(ctx, min(b.opts.HealthTimeout, 3*time.Second))
		_, err = g.client.Version(cctx)
		cancel()
		if err != nil {
			g.unreserve()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			err = g.unreachable(err)
			b.recordCheck(g, 0, err, b.opts.UnhealthyAfter)
			errs = append(errs, err)
			continue
		}
		p := b.newPlacement(g, spec)
		b.log.Debug("session placed", "session", spec.ID, "gateway", g.name)
		return p, nil
	}
}

// pick chooses the healthy gateway with the least load, skipping tried ones, and
// counts a placement on it.
func (b *Backend) pick(tried map[*gateway]bool) (*gateway, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gate.Closed() {
		return nil, ErrClosed
	}
	var best *gateway
	bestLoad := 0
	var down []string
	for _, g := range b.gateways {
		g.mu.Lock()
		healthy, load, lastErr := g.healthy, g.load(), g.lastErr
		g.mu.Unlock()
		if !healthy || tried[g] {
			if lastErr != nil && !tried[g] {
				down = append(down, lastErr.Error())
			}
			continue
		}
		if best == nil || load < bestLoad {
			best, bestLoad = g, load
		}
	}
	if best == nil {
		if len(down) == 0 {
			return nil, ErrNoGateway
		}
		return nil, fmt.Errorf("%w: %s", ErrNoGateway, strings.Join(down, "; "))
	}
	best.mu.Lock()
	best.reserved++ // until the placement is registered, so concurrent picks spread
	best.mu.Unlock()
	return best, nil
}

// Health reports an error when no gateway is in the rotation.
func (b *Backend) Health(context.Context) error {
	var errs []error
	for _, g := range b.gateways {
		s := g.status()
		if s.Healthy {
			return nil
		}
		errs = append(errs, errors.New(s.Error))
	}
	return fmt.Errorf("%w: %w", ErrNoGateway, errors.Join(errs...))
}

// Close stops the health checks and empties the state file. The executor has
// shut the kernels down, which removed their session directories; the gateways
// themselves are not ours to stop.
func (b *Backend) Close(ctx context.Context) error {
	if !b.gate.Shut() {
		return nil
	}
	if b.opts.StateFile != "" {
		b.keptFile.Final(func() { b.writeKept(nil) })
	}
	keep.Unlock(b.stateLock)
	return b.stopChecks(ctx)
}

// stopChecks stops the health checks and waits for them, bounded by ctx.
func (b *Backend) stopChecks(ctx context.Context) error {
	b.stopAll()
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("remote backend: close: %w", ctx.Err())
	}
	b.closeIdle()
	return nil
}

func (b *Backend) closeIdle() {
	for _, g := range b.gateways {
		g.client.CloseIdle()
		g.files.CloseIdle()
	}
}

// uploadTimeout bounds one Contents API request whose caller set no deadline; a
// 4 MiB piece takes well under a second on a working link.
const uploadTimeout = 5 * time.Minute

// kernelEnv returns a copy of the configured kernel env, or nil.
func (b *Backend) kernelEnv() map[string]string {
	if len(b.opts.KernelEnv) == 0 {
		return nil
	}
	return maps.Clone(b.opts.KernelEnv)
}

// syncOptions configures a placement's file sync on gateway g: Options.Sync with
// the fields that are the backend's.
func (b *Backend) syncOptions(g *gateway) kernelfs.Options {
	o := b.opts.Sync
	o.KernelPath = b.opts.KernelPath
	o.Logger = b.log.With("gateway", g.name)
	o.Uploader = nil
	if b.opts.Transfer == TransferContents {
		o.Uploader = g.files
	}
	return o
}
