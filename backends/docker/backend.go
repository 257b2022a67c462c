package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
	"github.com/kernelbox/kernelbox/backends/internal/keep"
	"github.com/kernelbox/kernelbox/backends/internal/sessionproxy"
	"github.com/kernelbox/kernelbox/executor"
)

// teardownTimeout bounds Close and Placement.Close, which run under their own
// context so that a cancelled caller cannot leave containers behind.
const teardownTimeout = 20 * time.Second

// socketRootPrefix names the backend's private directory of socket directories.
const socketRootPrefix = "kernelbox-sock-"

// Backend runs each session in its own hardened container. Create it with [New]; it
// is safe for concurrent use. Close removes every container it created.
type Backend struct {
	api      dockerAPI
	cfg      config
	instance string // uuid, the LabelInstance value
	owner    owner  // this process, for the owner labels
	sockRoot string // private 0700 directory holding the socket directories

	runtimes RuntimeSet // the OCI runtimes the daemon knew at New, or later (runtime.go); mu guards it

	// gate lets Opens in until Close or Detach, which abort the Opens in flight
	// and wait for them.
	gate keep.Gate

	mu         sync.Mutex
	placements map[string]*Placement // by container id: created and not yet removed

	// What the state file kept from an earlier process (keep.go): the records
	// read by New, left for Reattach, and why none were when the file was bad.
	keptFile keep.Writes // writes of the state file (keep.go)
	kept     keep.Kept[map[string]keptContainer]

	// budgets are the sessions' egress byte budgets, kept beside the state
	// file (egress.go).
	budgets *sessionproxy.Budgets
	secrets secretsCA // the interception CA, made for the first template with secrets (secrets.go)
	// noNetns logs, once, why egress takes the forwarder (egressns.go).
	noNetns sync.Once

	pylib *pylibs // the images' shared Python libraries (pylib.go)
}

var (
	_ executor.Backend       = (*Backend)(nil)
	_ executor.HealthChecker = (*Backend)(nil)
	_ executor.DataMounter   = (*Backend)(nil)
	_ executor.StateKeeper   = (*Backend)(nil)
)

// New connects to the Docker daemon, checks that the kernel image is present, and
// removes containers left behind by kernelbox processes that are gone (see
// [LabelOwner]) before it returns. It fails with an error wrapping [ErrNoImage] when
// the image is missing.
func New(ctx context.Context, opts Options) (*Backend, error) {
	cfg, err := opts.resolve(os.Geteuid(), os.Getegid())
	if err != nil {
		return nil, fmt.Errorf("docker backend: %w", err)
	}
	api, err := dockerapi.NewClient(cfg.dockerHost)
	if err != nil {
		return nil, fmt.Errorf("docker backend: %w", err)
	}
	b, err := newBackend(ctx, cfg, api)
	if err != nil {
		_ = api.Close()
		return nil, fmt.Errorf("docker backend: %w", err)
	}
	return b, nil
}

// newBackend is New with the configuration resolved and the client made.
func newBackend(ctx context.Context, cfg config, api dockerAPI) (*Backend, error) {
	if _, err := api.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return nil, fmt.Errorf("docker daemon unreachable: %w", err)
	}
	runtimes, err := daemonRuntimes(ctx, api)
	if err != nil {
		return nil, err
	}
	if err := checkRuntime(cfg.runtime, runtimes); err != nil {
		return nil, err
	}
	if ok, err := imageExists(ctx, api, cfg.Image); err != nil {
		return nil, err
	} else if !ok {
		return nil, noImageError(cfg.Image)
	}
	own, err := currentOwner()
	if err != nil {
		return nil, fmt.Errorf("identify this process for container labels: %w", err)
	}
	if err := os.MkdirAll(cfg.socketRoot, 0o700); err != nil {
		return nil, fmt.Errorf("socket root: %w", err)
	}
	sockRoot, err := os.MkdirTemp(cfg.socketRoot, socketRootPrefix)
	if err != nil {
		return nil, fmt.Errorf("socket root: %w", err)
	}
	b := &Backend{
		api:        api,
		cfg:        cfg,
		instance:   uuid.NewString(),
		owner:      own,
		sockRoot:   sockRoot,
		placements: make(map[string]*Placement),
		budgets:    sessionproxy.NewBudgets(sessionproxy.BudgetsFile(cfg.stateFile), cfg.log),
		runtimes:   runtimes,
		pylib:      newPylibs(),
	}
	kept, skipped, err := readKept(cfg.stateFile, cfg.socketRoot, own)
	if errors.Is(err, ErrStateInUse) {
		_ = os.Remove(sockRoot)
		return nil, err
	}
	if err != nil {
		cfg.log.Error("the state file cannot be used: no session is adopted, their containers are reaped", "err", err)
	}
	b.kept.Set(kept, err)
	for _, why := range skipped {
		cfg.log.Error("the state file lists a container it cannot adopt; it is reaped", "reason", why)
	}
	if err := markRoot(sockRoot, cfg.stateFile); err != nil {
		cfg.log.Warn("mark the socket root with the state file", "err", err)
	}
	// The default image's shared libraries, made ready (once per image id) before
	// the first cold start needs them.
	b.pylibFor(ctx, cfg.Image)
	n, err := b.reap(ctx)
	if err != nil {
		// The backend works without reaping; the orphans stop at their max lifetime.
		cfg.log.Warn("reaping orphaned containers failed", "err", err)
	}
	cfg.log.Info("docker backend ready", "image", cfg.Image, "instance", b.instance, "reaped", n,
		"user", fmt.Sprintf("%d:%d", cfg.UID, cfg.GID), "memory", cfg.Memory, "network", cfg.network,
		"runtime", or(cfg.runtime, runtimes.Default), "transport", transportFor(cfg.transport, cfg.runtime, runtimes.Default))
	return b, nil
}

// StateDirs returns the private directory holding the containers' socket
// directories (with each server's token), which no input may be staged from.
func (b *Backend) StateDirs() []string {
	dirs := []string{b.sockRoot}
	for _, k := range b.kept.Peek() {
		if d := filepath.Dir(k.SockDir); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// Name returns "docker".
func (b *Backend) Name() string { return "docker" }

// Applies reports that this backend applies every container field of a session's
// template (kernel, image, memory, CPUs, pids, max lifetime, environment).
func (b *Backend) Applies() executor.SpecFields {
	// A network allowlist needs the container on --network none: its egress is
	// then only the proxy's socket (egress.go). On a Docker network it could
	// bypass the proxy.
	return executor.SpecFields{Kernel: true, Image: true, Memory: true, CPUs: true, Pids: true, MaxLifetime: true, Env: true, Runtime: true,
		Network: b.cfg.network == DefaultNetwork, Secrets: b.cfg.network == DefaultNetwork}
}

// MountsData reports that this backend exposes SessionSpec.Data itself, as read-only
// bind mounts at /workspace/data/<name>.
func (b *Backend) MountsData() bool { return true }

// Close removes every container this backend created, including those of placements
// not closed and of Opens still in flight (which it aborts), and the socket
// directories, then closes the Docker client. It runs under its own bounded context,
// so that it finishes even when ctx is already done; ctx only carries values. It
// counts the containers to remove from the daemon (by LabelInstance), not only from
// its own records. Closing twice is a no-op.
func (b *Backend) Close(ctx context.Context) error {
	if !b.gate.Shut() {
		return nil
	}
	ctx, cancel := teardownContext(ctx)
	defer cancel()
	b.mu.Lock()
	ps := make([]*Placement, 0, len(b.placements))
	for _, p := range b.placements {
		ps = append(ps, p)
	}
	b.mu.Unlock()

	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { errs[i] = p.close(ctx) })
	}
	wg.Wait()
	b.pylib.stop()

	// Anything else carrying this instance's label: a container the daemon created
	// for a create call that failed on our side, for example.
	list, err := b.api.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelInstance+"="+b.instance),
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("list containers: %w", err))
	} else {
		for _, c := range list.Items {
			errs = append(errs, b.removeContainer(ctx, c.ID))
		}
	}
	if err := os.RemoveAll(b.sockRoot); err != nil {
		errs = append(errs, fmt.Errorf("remove socket dirs: %w", err))
	}
	if err := b.api.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close docker client: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		b.cfg.log.Error("docker backend closed with errors", "err", err)
		return fmt.Errorf("close docker backend: %w", err)
	}
	b.cfg.log.Info("docker backend closed", "containers", len(ps))
	return nil
}

// Health reports whether the backend can place sessions: the daemon answers and the
// kernel image is present (an error wrapping [ErrNoImage] says how to build it).
func (b *Backend) Health(ctx context.Context) error {
	if b.gate.Closed() {
		return ErrClosed
	}
	if _, err := b.api.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("docker daemon unreachable: %w", err)
	}
	ok, err := imageExists(ctx, b.api, b.cfg.Image)
	if err != nil {
		return err
	}
	if !ok {
		return noImageError(b.cfg.Image)
	}
	return b.silentServers(ctx)
}

// removeContainer force-removes container id; one already gone is not an error.
// A removal that conflicts with one already under way (docker rm by hand, another
// process's reaper) is done once the container is gone, within the context.
func (b *Backend) removeContainer(ctx context.Context, id string) error {
	_, err := b.api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if dockerapi.IsConflict(err) {
		err = b.waitRemoved(ctx, id, err)
	}
	if err != nil && !dockerapi.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", dockerapi.Short(id), err)
	}
	return nil
}

// waitRemoved waits until container id is gone (nil) or ctx ends (cause).
func (b *Backend) waitRemoved(ctx context.Context, id string, cause error) error {
	for {
		if _, err := b.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); dockerapi.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return cause
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// track records a created container so that Close removes it.
func (b *Backend) track(p *Placement) {
	b.mu.Lock()
	b.placements[p.id] = p
	b.mu.Unlock()
}

// forget drops a removed container from the records.
func (b *Backend) forget(p *Placement) {
	b.mu.Lock()
	delete(b.placements, p.id)
	b.mu.Unlock()
	b.saveKept()
}

// teardownContext returns a context for removing containers: it keeps ctx's values
// but not its cancellation, and ends after teardownTimeout.
func teardownContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
}

// randomHex returns n random bytes from crypto/rand, hex-encoded.
func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// isContainerKey reports whether s has the shape of the 8-hex-digit key that names a
// container's socket directory.
func isContainerKey(s string) bool {
	if len(s) != 8 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
