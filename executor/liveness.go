package executor

import (
	"context"
	"errors"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
)

// alive reports whether the kernel's connection is usable and, when its placement
// watches the kernel's process (KernelWatcher), that the process still runs.
func (k *kernel) alive() bool {
	return k != nil && k.conn != nil && k.conn.Err() == nil && !k.abandoned() && !k.processExited()
}

// processExited reports whether the kernel's watched process has exited (false when
// it is not watched).
func (k *kernel) processExited() bool { return k.exited != nil && k.exited() }

// abandoned reports whether the placement said its server is gone for good.
func (k *kernel) abandoned() bool {
	if k == nil || k.lost == nil {
		return false
	}
	select {
	case <-k.lost:
		return true
	default:
		return false
	}
}

// closeOnLost closes the kernel's connection if the placement reports its server
// lost before stop is called, so that a call in flight ends at once instead of
// waiting for a server that is gone. stop ends the watch and waits for it.
func (k *kernel) closeOnLost() (stop func()) {
	if k.lost == nil || k.conn == nil {
		return func() {}
	}
	conn := k.conn
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-k.lost:
			_ = conn.Close()
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// recover tries to reconnect to the same kernel after its connection ended. It
// reports whether that worked and, when the connection ended because the server said
// the kernel died (and has restarted it under the same id), why its state is gone:
// a FileSyncer placement is then asked to set it up again (fresh).
func (k *kernel) recover(ctx context.Context, e *Executor) (ok bool, lostWhy string) {
	if k.abandoned() {
		// Its placement said the server is gone for good (a container that
		// stopped, a gateway that left): say why when the placement knows.
		// Bounded: an unreachable placement must not hold the call up.
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if cause := k.diagnose(dctx); cause != "" {
			return false, "the kernel's server went away after the previous call: " + cause
		}
		return false, ""
	}
	var died *jupyter.KernelDiedError
	if told := k.conn != nil && errors.As(k.conn.Err(), &died); told || k.processExited() {
		lostWhy = "the kernel died after the previous call and its server restarted it"
		if !told {
			// Found by the process watch before the server noticed: the server
			// restarts it (within its restarter's poll interval), and the
			// connection below is to the new one.
			lostWhy = "the kernel died after the previous call, before this call was sent, and its server restarted it"
		}
		if cause := k.diagnose(ctx); cause != "" {
			lostWhy += ": " + cause
		} else {
			lostWhy += " (the process exited; common causes: os._exit, a crash in native code, running out of memory)"
		}
	}
	kr, err := k.client.Kernel(ctx, k.id)
	if err != nil || kr.ExecutionState == "dead" {
		return false, lostWhy
	}
	if k.connect(ctx, e) != nil {
		return false, lostWhy
	}
	k.fresh = true
	if lostWhy != "" {
		k.count = 0
		// A new interpreter: the template's preload again.
		if err := e.prepare(ctx, k); err != nil {
			return false, lostWhy + "; " + err.Error()
		}
	}
	return true, lostWhy
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
