package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
)

// kernel is a started kernel with its connection, on its placement.
type kernel struct {
	placement Placement
	client    *jupyter.Client
	id        string
	conn      *jupyter.Conn
	fresh     bool // started or restarted since files were last pushed (FileSyncer)
}

// startKernel places a session, starts its kernel and connects to it.
func (e *Executor) startKernel(ctx context.Context, spec SessionSpec) (_ *kernel, err error) {
	p, err := e.opts.Backend.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	k := &kernel{placement: p}
	defer func() {
		if err != nil {
			_ = k.shutdown(context.Background(), e.opts.ShutdownTimeout)
		}
	}()
	srv := p.Server()
	k.client, err = jupyter.NewClient(srv.Endpoint, &jupyter.ClientOptions{Logger: e.log})
	if err != nil {
		return nil, err
	}
	kr, err := k.client.StartKernel(ctx, jupyter.StartOptions{Name: srv.KernelName, Path: srv.KernelPath, Env: srv.KernelEnv})
	if err != nil {
		return nil, err
	}
	k.id, k.fresh = kr.ID, true
	e.opts.Observer.KernelStarted()
	if err := k.connect(ctx, e); err != nil {
		return nil, err
	}
	return k, nil
}

// connect opens a fresh WebSocket to the kernel and waits for kernel_info.
func (k *kernel) connect(ctx context.Context, e *Executor) error {
	if k.conn != nil {
		_ = k.conn.Close()
		k.conn = nil
	}
	conn, err := k.client.Connect(ctx, k.id, &jupyter.ConnOptions{
		Logger:          e.log,
		MaxMessageBytes: max(e.opts.MaxStreamBytes, e.opts.MaxRichBytes) + 1<<20,
	})
	if err != nil {
		return err
	}
	if _, err := conn.KernelInfo(ctx); err != nil {
		_ = conn.Close()
		return fmt.Errorf("kernel_info: %w", err)
	}
	k.conn = conn
	return nil
}

// alive reports whether the kernel's connection is usable.
func (k *kernel) alive() bool {
	return k != nil && k.conn != nil && k.conn.Err() == nil
}

// recover tries to reconnect to the same kernel after its connection ended. It
// reports whether that worked; the kernel may have been restarted by the server.
func (k *kernel) recover(ctx context.Context, e *Executor) bool {
	kr, err := k.client.Kernel(ctx, k.id)
	if err != nil || kr.ExecutionState == "dead" {
		return false
	}
	return k.connect(ctx, e) == nil
}

// restart restarts the kernel under the same id (its state is lost) and reconnects.
func (k *kernel) restart(ctx context.Context, e *Executor) error {
	if k.conn != nil {
		_ = k.conn.Close()
		k.conn = nil
	}
	if _, err := k.client.Restart(ctx, k.id); err != nil {
		return err
	}
	k.fresh = true
	return k.connect(ctx, e)
}

// diagnose asks the placement why the kernel died, if it can tell.
func (k *kernel) diagnose(ctx context.Context) string {
	if d, ok := k.placement.(Diagnoser); ok {
		return d.Diagnose(ctx)
	}
	return ""
}

// serverAlive reports whether the kernel's server still answers.
func (k *kernel) serverAlive(ctx context.Context) bool {
	_, err := k.client.Kernel(ctx, k.id)
	return err == nil || errors.Is(err, jupyter.ErrNotFound)
}

// shutdown stops the kernel and releases its placement, under a fresh bounded
// context: it runs when the caller's context may already be done.
func (k *kernel) shutdown(_ context.Context, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var errs []error
	if k.conn != nil {
		_ = k.conn.Close()
	}
	if k.client != nil && k.id != "" {
		if err := k.client.Shutdown(ctx, k.id); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			// A server that is gone has taken the kernel with it.
			if k.serverAlive(ctx) {
				errs = append(errs, err)
			}
		}
		k.client.CloseIdle()
	}
	if k.placement != nil {
		if err := k.placement.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("release placement: %w", err))
		}
	}
	return errors.Join(errs...)
}
