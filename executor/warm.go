package executor

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
)

// WarmReady returns how many warm kernels are started and waiting for a session,
// all templates together.
func (e *Executor) WarmReady() int {
	n := 0
	for _, p := range e.pools {
		n += p.count()
	}
	return n
}

// WarmReadyOf returns how many warm kernels of one template are waiting.
func (e *Executor) WarmReadyOf(template string) int {
	if p := e.pools[template]; p != nil {
		return p.count()
	}
	return 0
}

// warmUpCode is what a warm Python kernel runs once before it waits in its pool:
// the display formatting that an interpreter's first expression result goes
// through, which costs a fresh ipykernel 5 to 7 ms of CPU the first time and
// not again (issue 53's profile: the first `1 + 1` of a fresh kernel took 10 to
// 14 ms of the kernel's CPU, the next ones 4 to 6). It names nothing in the
// user's namespace, its last statement has no value (no Out, no `_`), and it
// runs without storing history, so the session's first call still has
// execution count 1. A kernel without IPython's get_ipython runs the except.
const warmUpCode = "try:\n    get_ipython().display_formatter.format(0)\nexcept Exception:\n    pass"

// warmUpWait bounds a warm kernel's warm-up.
const warmUpWait = 10 * time.Second

// warmUp runs warmUpCode in the warm kernel k, a Python one, so that the first
// call of the session that takes it does not pay for the interpreter's first
// result; it is not silent (ipykernel's silent path skips what a call goes
// through). Its messages end with its reply and the kernel's idle status, so
// none is left over for the session's first call. An error means the kernel
// or its connection failed: the kernel is not to be handed out; a kernel that
// answers with an error only loses the warm-up.
func (e *Executor) warmUp(ctx context.Context, k *kernel) error {
	if !k.python() || k.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, warmUpWait)
	defer cancel()
	ex, err := k.conn.Execute(ctx, jupyter.ExecuteRequest{Code: warmUpCode, StoreHistory: false})
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	defer ex.Close()
	for {
		_, err := ex.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	r, err := ex.Reply()
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if r.Status != "ok" {
		// It answers: only the warm-up is lost, the kernel is fine to hand out.
		e.log.Debug("warm pool: the kernel's warm-up did not run", "kernel_id", k.id, "status", r.Status, "ename", r.Ename, "evalue", r.Evalue)
	}
	return nil
}

// adoptPlacement tells a warm kernel's placement the session that took it,
// bounded by adoptWait. An EarlyAdopter gets AdoptNow at once and its Adopt
// on a goroutine (which Close waits for) once no call is running, the
// session's first included, or after adoptDefer; another Adopter's Adopt is
// waited for, so it ends before that call runs.
func (e *Executor) adoptPlacement(ctx context.Context, a Adopter, session, kernelID string) {
	tell := func(ctx context.Context) {
		actx, cancel := context.WithTimeout(ctx, adoptWait)
		defer cancel()
		if err := a.Adopt(actx, session); err != nil {
			e.log.Warn("warm pool: the kernel's placement could not record its new session; it keeps its pool name", "session", session, "kernel_id", kernelID, "err", err)
		}
	}
	ea, ok := a.(EarlyAdopter)
	if !ok {
		tell(ctx)
		return
	}
	ea.AdoptNow(session)
	// The session's worker, which takes the kernel, is counted in e.wg: the
	// count is above zero here, so this Add cannot race with Close's Wait.
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.awaitNoCall(adoptDefer)
		tell(context.WithoutCancel(ctx))
	}()
}

// adoptDefer bounds how long an EarlyAdopter's Adopt waits for the calls
// running (the taking session's first among them) to end: its engine round
// trip and fsync take CPU that call would otherwise wait for.
const adoptDefer = 2 * time.Second

// awaitNoCall waits until no call is running, or for at most bound, or until
// the executor closes.
func (e *Executor) awaitNoCall(bound time.Duration) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	end := time.Now().Add(bound)
	for e.running.Load() > 0 && time.Now().Before(end) {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
	}
}
