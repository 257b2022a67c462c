package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
	"github.com/kernelbox/kernelbox/backends/internal/keep"
	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/serverflags"
	"github.com/kernelbox/kernelbox/internal/undo"
	"github.com/kernelbox/kernelbox/jupyter"
)

// Open creates and starts the session's container and waits, up to
// [Options.ReadyTimeout], until its Jupyter server answers on its socket. When the
// server does not come up, Open removes the container and returns a [*StartError]
// with the container's state and last log lines. After Close, Open returns
// [ErrClosed].
func (b *Backend) Open(ctx context.Context, spec executor.SessionSpec) (executor.Placement, error) {
	return keep.Open(ctx, &b.gate, ErrClosed, spec.ID, func(ctx context.Context) (executor.Placement, error) {
		return b.open(ctx, spec)
	})
}

// launch is one Open in progress: what its steps share, and the undo list of what
// they did, run when a later step fails.
type launch struct {
	spec    executor.SessionSpec
	cfg     config // the backend's, with the session's template applied
	log     *slog.Logger
	key     string // random, names the container and its state directory
	name    string // container name (containerName)
	token   string // the server's token
	sockDir string // host path of the state directory, mounted read-only
	imageID string // the image by id, when libs are its shared libraries (pylib.go)
	libs    []mount.Mount
	undo    undo.List

	t0, tCreated, tStarted time.Time // before create, before start, after start
}

// open does Open's work in steps: prepare the directories, create the container,
// start it, wait until its server is ready. When a step fails, what the earlier
// ones did is undone.
func (b *Backend) open(ctx context.Context, spec executor.SessionSpec) (_ *Placement, err error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	l := &launch{spec: spec, cfg: b.cfg.withTemplate(spec.Template), log: b.cfg.log.With("session", spec.ID)}
	if spec.Template.Network != nil {
		l.cfg.Env = append(slices.Clone(l.cfg.Env), proxyEnv()...)
		l.cfg.Env = append(l.cfg.Env, secretsEnv(spec.Template.Network.Secrets())...)
	}
	defer func() {
		if err != nil {
			if uerr := l.undo.Run(teardownTimeout); uerr != nil {
				l.log.Error("clean up failed open", "err", uerr)
			}
		}
	}()
	if err := b.prepareDirs(l); err != nil {
		return nil, err
	}
	b.sharedLibs(ctx, l)
	transport, err := b.sessionRuntime(ctx, l)
	if err != nil {
		return nil, err
	}
	p, err := b.createContainer(ctx, l)
	if err != nil {
		return nil, err
	}
	if transport == TransportRelay {
		if err := b.listenForRelay(l, p); err != nil {
			return nil, err
		}
	}
	if err := b.startContainer(ctx, l, p); err != nil {
		return nil, err
	}
	if err := b.awaitReady(ctx, l, p); err != nil {
		return nil, err
	}
	if err := b.startEgress(ctx, l, p); err != nil {
		return nil, err
	}
	b.saveKept()
	l.log.Info("container ready", "name", l.name, "elapsed", time.Since(l.t0).Round(time.Millisecond),
		"create", l.tCreated.Sub(l.t0).Round(time.Millisecond), "start", l.tStarted.Sub(l.tCreated).Round(time.Millisecond),
		"server", time.Since(l.tStarted).Round(time.Millisecond))
	return p, nil
}

// prepareDirs picks the container's key and token and prepares the host side: the
// state directory with the server's launcher, kernelspec and token, and the session
// directory with the ownership and modes the container's user needs.
func (b *Backend) prepareDirs(l *launch) error {
	key, err := randomHex(4)
	if err != nil {
		return err
	}
	if l.token, err = randomHex(32); err != nil {
		return err
	}
	l.key = key
	l.name = containerName(l.spec.ID, l.spec.Template.Name, l.spec.Warm, key)
	l.sockDir = filepath.Join(b.sockRoot, key)
	if err := os.Mkdir(l.sockDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	l.undo.Add("remove state dir", func(context.Context) error { return os.RemoveAll(l.sockDir) })
	if b.cfg.chown {
		// The kernel's user reads the launcher, kernelspec and token config
		// here; the mount is read-only, so nobody in the container writes.
		// Nothing outside the container reaches it: the backend's root is 0700.
		if err := os.Chmod(l.sockDir, 0o755); err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
	}
	// The server's launcher, read-only, like the whole mount, so that the kernel
	// cannot replace what the next server start would run.
	if _, err := serverflags.WriteLauncher(l.sockDir); err != nil {
		return err
	}
	// The kernels' kernelspec, beside it (JUPYTER_PATH): the same kernel launcher as
	// the local backend's.
	if err := serverflags.WriteKernelSpec(filepath.Join(l.sockDir, kernelSpecDir), b.cfg.Python); err != nil {
		return err
	}
	if err := writeTokenConfig(filepath.Join(l.sockDir, configDirName), l.token, b.cfg.chown, b.cfg.GID); err != nil {
		return err
	}
	if err := b.writeCABundle(l); err != nil {
		return err
	}
	return prepareSessionDir(b.cfg, l.spec.Dir, l.spec.Data)
}

// createContainer creates the session's container and records it, both with the
// backend (so that Close removes it) and on the undo list.
func (b *Backend) createContainer(ctx context.Context, l *launch) (*Placement, error) {
	labels := sandbox.Labels(b.instance, "")
	maps.Copy(labels, b.owner.labels())
	l.t0 = time.Now()
	opts := createOptions(l.cfg, labels, containerSpec{
		name: l.name, session: l.spec.ID, dir: l.spec.Dir, sockDir: l.sockDir, data: l.spec.Data,
		imageID: l.imageID, libs: l.libs,
	})
	// Create under a context that ctx cannot cancel: a create abandoned half-way
	// can still complete in the daemon after we have given up on it, leaving a
	// container nobody knows the id of. Waiting for the answer (create takes
	// milliseconds) means we always learn the id and can remove it.
	createCtx, cancelCreate := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	created, err := b.api.ContainerCreate(createCtx, opts)
	cancelCreate()
	if err != nil {
		if dockerapi.IsNotFound(err) {
			return nil, noImageError(l.cfg.Image)
		}
		// Only after a timeout might the daemon still be creating it.
		l.undo.Add("remove half-created container "+l.name, func(ctx context.Context) error {
			return b.removeContainer(ctx, l.name)
		})
		return nil, fmt.Errorf("create container: %w", err)
	}
	for _, w := range created.Warnings {
		l.log.Warn("docker create warning", "container", dockerapi.Short(created.ID), "warning", w)
	}
	p := &Placement{
		b: b, id: created.ID, key: l.key, name: l.name, session: l.spec.ID, sockDir: l.sockDir, started: l.t0, lost: make(chan struct{}),
		memory: l.cfg.Memory, memTmpl: l.spec.Template.Memory != 0, lifetime: l.cfg.MaxLifetime,
		server: executor.Server{
			// Socket is set once the server's socket is pinned (awaitReady).
			Endpoint: jupyter.Endpoint{URL: "http://localhost", Token: l.token},
			// "ir" and any other name but "python3" must be a kernelspec the
			// image has (kernelbox/kernel-r has "ir"); the executor lists what
			// the image offers when it has none.
			KernelName: serverflags.SpecName(l.spec.Template.Kernel),
			// The session directory is the server's root directory.
			KernelPath: "",
		},
	}
	b.track(p)
	l.undo.Add("remove failed container "+dockerapi.Short(p.id), p.close)
	l.log = l.log.With("container", dockerapi.Short(p.id))
	return p, nil
}

// startContainer starts the created container.
func (b *Backend) startContainer(ctx context.Context, l *launch, p *Placement) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.tCreated = time.Now()
	if _, err := b.api.ContainerStart(ctx, p.id, client.ContainerStartOptions{}); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return b.startError(p.id, l.name, fmt.Errorf("start: %w", err))
	}
	l.tStarted = time.Now()
	return nil
}

// awaitReady waits until the container's server answers on its socket, which it
// pins (see pinServerSocket), then finds the container's OOM-kill counter.
func (b *Backend) awaitReady(ctx context.Context, l *launch, p *Placement) error {
	if p.relay != nil {
		return b.awaitRelay(ctx, l, p)
	}
	pid, sock, err := b.waitReady(ctx, p.id, l.token)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, errExited) {
			return err
		}
		return b.startError(p.id, l.name, err)
	}
	// Placement.close closes the pinned socket after removing the container.
	p.sock, p.pid = sock, pid
	p.sockDev, p.sockIno = fileID(sock)
	p.server.Endpoint.Socket = fdPath(sock)
	p.ready.Store(true) // after server: Health reads it only once ready
	p.watchExit()
	p.findOOMCounter(l.log)
	return nil
}
