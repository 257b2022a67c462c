// Package undo records the cleanup steps of a setup done in several steps (a
// container, or a swarm service with its network and secret), so that a failure in a
// later step takes back what the earlier ones did. Start at [List].
package undo

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// List records the cleanup steps of a setup done in several steps, so that a
// failure in a later step can take back what the earlier ones did. The zero value
// is ready to use; it is not safe for concurrent use (one setup owns it).
type List struct {
	steps []undoStep
}

// undoStep is one recorded cleanup step.
type undoStep struct {
	what string // names the step in its error: "remove socket dir"
	fn   func(ctx context.Context) error
}

// Add records a cleanup step; what names it in the error Run returns.
func (u *List) Add(what string, fn func(ctx context.Context) error) {
	u.steps = append(u.steps, undoStep{what: what, fn: fn})
}

// Run runs the recorded steps, the last one first, and forgets them. Every step
// runs even when an earlier one failed; their errors are joined. The steps share
// a fresh context bounded by timeout, because the setup's own context is usually
// why it failed (cancelled or past its deadline) while a container can outlive it.
func (u *List) Run(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var errs []error
	for i := len(u.steps) - 1; i >= 0; i-- {
		if err := u.steps[i].fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.steps[i].what, err))
		}
	}
	u.steps = nil
	return errors.Join(errs...)
}
