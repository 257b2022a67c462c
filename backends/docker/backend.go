package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/serverflags"
	"github.com/kernelbox/kernelbox/jupyter"
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

	// stopCtx is cancelled by Close to abort Opens in flight. It is a lifetime
	// signal, not a request context: storing it is the simplest way to tie each
	// Open's context to the backend's end with context.AfterFunc.
	stopCtx context.Context
	stop    context.CancelFunc
	opening sync.WaitGroup // Opens in flight; Close waits for them

	mu         sync.Mutex
	closed     bool
	placements map[string]*Placement // by container id: created and not yet removed
}

var (
	_ executor.Backend       = (*Backend)(nil)
	_ executor.HealthChecker = (*Backend)(nil)
	_ executor.DataMounter   = (*Backend)(nil)
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
	api, err := newClient(cfg.dockerHost)
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
	if ok, err := imageExists(ctx, api, cfg.image); err != nil {
		return nil, err
	} else if !ok {
		return nil, noImageError(cfg.image)
	}
	own, err := currentOwner()
	if err != nil {
		return nil, fmt.Errorf("identify this process for container labels: %w", err)
	}
	if err := os.MkdirAll(cfg.socketRoot, 0o755); err != nil {
		return nil, fmt.Errorf("socket root: %w", err)
	}
	sockRoot, err := os.MkdirTemp(cfg.socketRoot, socketRootPrefix)
	if err != nil {
		return nil, fmt.Errorf("socket root: %w", err)
	}
	stopCtx, stop := context.WithCancel(context.Background())
	b := &Backend{
		api:        api,
		cfg:        cfg,
		instance:   uuid.NewString(),
		owner:      own,
		sockRoot:   sockRoot,
		stopCtx:    stopCtx,
		stop:       stop,
		placements: make(map[string]*Placement),
	}
	n, err := b.reap(ctx)
	if err != nil {
		// The backend works without reaping; the orphans stop at their max lifetime.
		cfg.log.Warn("reaping orphaned containers failed", "err", err)
	}
	cfg.log.Info("docker backend ready", "image", cfg.image, "instance", b.instance, "reaped", n,
		"user", fmt.Sprintf("%d:%d", cfg.uid, cfg.gid), "memory", cfg.memory, "network", cfg.network)
	return b, nil
}

// Name returns "docker".
func (b *Backend) Name() string { return "docker" }

// MountsData reports that this backend exposes SessionSpec.Data itself, as read-only
// bind mounts at /workspace/data/<name>.
func (b *Backend) MountsData() bool { return true }

// Open creates and starts the session's container and waits, up to
// [Options.ReadyTimeout], until its Jupyter server answers on its socket. When the
// server does not come up, Open removes the container and returns a [*StartError]
// with the container's state and last log lines. After Close, Open returns
// [ErrClosed].
func (b *Backend) Open(ctx context.Context, spec executor.SessionSpec) (executor.Placement, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	b.opening.Add(1)
	b.mu.Unlock()
	defer b.opening.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.stopCtx, cancel)()

	p, err := b.open(ctx, spec)
	if err != nil {
		if b.stopCtx.Err() != nil {
			err = errors.Join(ErrClosed, err)
		}
		return nil, fmt.Errorf("open session %q: %w", spec.ID, err)
	}
	return p, nil
}

// open does Open's work.
func (b *Backend) open(ctx context.Context, spec executor.SessionSpec) (_ *Placement, err error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	key, err := randomHex(4)
	if err != nil {
		return nil, err
	}
	token, err := randomHex(32)
	if err != nil {
		return nil, err
	}
	sockDir := filepath.Join(b.sockRoot, key)
	if err := os.Mkdir(sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("socket dir: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(sockDir)
		}
	}()
	if b.cfg.chown {
		// Root-owned and sticky: the server may create its socket here, and once
		// the socket is handed to root (pinSocket) the kernel can neither remove
		// nor replace it. Nothing outside the container can reach it: the
		// backend's socket root is 0700.
		if err := os.Chmod(sockDir, 0o777|os.ModeSticky); err != nil {
			return nil, fmt.Errorf("socket dir: %w", err)
		}
	}
	// The server's launcher, read-only: root-owned when kernelbox is root, so the
	// kernel cannot replace what the next server start would run.
	if _, err := serverflags.WriteLauncher(sockDir); err != nil {
		return nil, err
	}
	// The kernels' kernelspec, beside it (JUPYTER_PATH): the same kernel launcher as
	// the local backend's.
	if err := serverflags.WriteKernelSpec(filepath.Join(sockDir, kernelSpecDir), b.cfg.python); err != nil {
		return nil, err
	}
	if err := prepareSessionDir(b.cfg, spec.Dir, spec.Data); err != nil {
		return nil, err
	}

	name := "kernelbox-" + key
	log := b.cfg.log.With("session", spec.ID)
	labels := b.owner.labels()
	labels[LabelCreatedBy] = createdByValue
	labels[LabelInstance] = b.instance
	t0 := time.Now()
	opts := createOptions(b.cfg, labels, containerSpec{
		name: name, session: spec.ID, dir: spec.Dir, sockDir: sockDir, token: token, data: spec.Data,
	})
	// Create under a context that ctx cannot cancel: a create abandoned half-way
	// can still complete in the daemon after we have given up on it, leaving a
	// container nobody knows the id of. Waiting for the answer (create takes
	// milliseconds) means we always learn the id and can remove it.
	createCtx, cancelCreate := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	created, err := b.api.ContainerCreate(createCtx, opts)
	cancelCreate()
	if err != nil {
		if isNotFound(err) {
			return nil, noImageError(b.cfg.image)
		}
		// Only after a timeout might the daemon still be creating it.
		b.removeByName(name)
		return nil, fmt.Errorf("create container: %w", err)
	}
	for _, w := range created.Warnings {
		log.Warn("docker create warning", "container", shortID(created.ID), "warning", w)
	}
	sock := filepath.Join(sockDir, socketName)
	p := &Placement{
		b: b, id: created.ID, name: name, session: spec.ID, sockDir: sockDir, started: t0,
		server: executor.Server{
			Endpoint:   jupyter.Endpoint{URL: "http://localhost", Token: token, Socket: sock},
			KernelName: serverflags.KernelName,
			// The session directory is the server's root directory.
			KernelPath: "",
		},
	}
	b.track(p)
	defer func() {
		if err != nil {
			ctx, cancel := teardownContext(ctx)
			defer cancel()
			if cerr := p.close(ctx); cerr != nil {
				log.Error("remove failed container", "container", shortID(p.id), "err", cerr)
			}
		}
	}()
	log = log.With("container", shortID(p.id))

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tCreated := time.Now()
	if _, err := b.api.ContainerStart(ctx, p.id, client.ContainerStartOptions{}); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, b.startError(p.id, name, fmt.Errorf("start: %w", err))
	}
	tStarted := time.Now()
	pid, err := b.waitReady(ctx, p.id, sock, token)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, errExited) {
			return nil, err
		}
		return nil, b.startError(p.id, name, err)
	}

	if b.cfg.chown {
		if err := pinSocket(sock); err != nil {
			return nil, b.startError(p.id, name, err)
		}
	}
	if f, err := oomCounterFile(pid, p.id); err != nil {
		log.Info("OOM kills will be counted from docker events", "reason", err)
	} else if n, err := readOOMKills(f); err == nil {
		p.mu.Lock()
		p.oomFile, p.oomSeen = f, n
		p.mu.Unlock()
	}
	log.Info("container ready", "name", name, "elapsed", time.Since(t0).Round(time.Millisecond),
		"create", tCreated.Sub(t0).Round(time.Millisecond), "start", tStarted.Sub(tCreated).Round(time.Millisecond),
		"server", time.Since(tStarted).Round(time.Millisecond))
	return p, nil
}

// Close removes every container this backend created, including those of placements
// not closed and of Opens still in flight (which it aborts), and the socket
// directories, then closes the Docker client. It runs under its own bounded context,
// so that it finishes even when ctx is already done; ctx only carries values. It
// counts the containers to remove from the daemon (by LabelInstance), not only from
// its own records. Closing twice is a no-op.
func (b *Backend) Close(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()

	b.stop()
	b.opening.Wait()

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
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if _, err := b.api.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("docker daemon unreachable: %w", err)
	}
	ok, err := imageExists(ctx, b.api, b.cfg.image)
	if err != nil {
		return err
	}
	if !ok {
		return noImageError(b.cfg.image)
	}
	return nil
}

// removeContainer force-removes container id; one already gone is not an error.
func (b *Backend) removeContainer(ctx context.Context, id string) error {
	_, err := b.api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("remove container %s: %w", shortID(id), err)
	}
	return nil
}

// removeByName removes the container called name, if the daemon has one, under a
// fresh context.
func (b *Backend) removeByName(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
	defer cancel()
	if err := b.removeContainer(ctx, name); err != nil {
		b.cfg.log.Error("remove half-created container", "container", name, "err", err)
	}
}

// pinSocket hands the server's socket to root, in its root-owned sticky directory,
// so that code in the container cannot swap it for a symlink to another socket on
// the host: kernelbox dials the socket by path, and connect(2) follows symlinks. It
// runs when the server is ready and before any kernel - any untrusted code - exists.
// When kernelbox is not root the kernel runs as kernelbox's own user and owns the
// directory, so this protection is not available.
func pinSocket(sock string) error {
	fi, err := os.Lstat(sock)
	if err != nil {
		return fmt.Errorf("pin socket: %w", err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("pin socket: %s is not a socket (%s)", sock, fi.Mode().Type())
	}
	if err := os.Lchown(sock, os.Geteuid(), os.Getegid()); err != nil {
		return fmt.Errorf("pin socket: %w", err)
	}
	return nil
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
