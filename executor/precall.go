package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/kernelbox/kernelbox/api"
)

// kernelReady checks, before a call, that the session's kernel can take it. It
// reports true when the call may be sent; false when the kernel must be recovered or
// replaced first (its connection ended, its watched process exited, its server lost
// it). A kernel whose server answers nothing at all within the check's bound is
// given up (the next call starts a fresh one) and the call fails with api.ErrBackend
// without being sent: sending it would hold it until its own timeout and grace, and
// its code would not run either.
func (s *session) kernelReady(ctx context.Context) (bool, error) {
	k := s.k
	if !k.alive() {
		return false, nil
	}
	quiet := time.Since(s.snapshot().LastActivity)
	if quiet < quietProbe {
		// Answered that recently; a death since is the process watch's to see.
		return true, nil
	}
	bound := min(preCallWait, s.e.connectStep())
	ok, err := k.answers(ctx, bound)
	if err != nil {
		s.log.Warn("the kernel's server does not answer; giving the kernel up", "err", err)
		s.abandonKernel()
		s.markLost("the kernel's server stopped answering before an earlier call, so its kernel was given up")
		return false, fmt.Errorf("%w: %w: its code was not sent and did not run; the kernel was given up (its state is lost) and the next call starts a fresh one", api.ErrBackend, err)
	}
	return ok, nil
}

// answers checks that a kernel whose connection looks fine still answers: a kernel
// that died in the last moments, before its server (or a process watch) noticed,
// would otherwise take the call with it and report a death that came before the
// call. A kernel_info request is harmless whichever kernel answers it. It reports
// false when the connection ended meanwhile (the caller then recovers or replaces
// the kernel). A kernel that does not answer within bound while its server does
// (GET /api/kernels/<id>, also within bound) is merely slow, and is given the call; a
// server that answers neither is frozen or far behind, reported as an error.
func (k *kernel) answers(ctx context.Context, bound time.Duration) (bool, error) {
	pctx, cancel := context.WithTimeout(ctx, bound)
	_, err := k.conn.KernelInfo(pctx)
	timedOut := err != nil && pctx.Err() != nil
	cancel()
	switch {
	case err == nil:
		return k.alive(), nil
	case !timedOut:
		return false, nil // the connection ended
	case ctx.Err() != nil:
		return k.alive(), nil // the call's own bound: it says so itself
	}
	rctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	_, err = k.client.Kernel(rctx, k.id)
	switch {
	case err == nil:
		return k.alive(), nil
	case rctx.Err() != nil && ctx.Err() == nil:
		return false, fmt.Errorf("the kernel's server answered neither kernel_info nor GET /api/kernels/%s within %s each (frozen or overloaded)", k.id, bound)
	}
	return false, nil // the server lost the kernel or went away: recover says which
}

// quietProbe is how long a kernel may sit unused before a call first checks that it
// answers; preCallWait bounds each step of that check (kernel_info, then the server),
// at most a third of ConnectTimeout. A dead kernel is reported by its server within
// its restarter's poll interval (0.5 s on the servers kernelbox starts, 3 s by
// default) or, for a container or server that went away, by the connection's
// reconnect bound (5 s); a watched process (KernelWatcher) at once.
const (
	quietProbe  = 200 * time.Millisecond
	preCallWait = 3 * time.Second
)
