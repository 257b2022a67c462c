package docker

import (
	"context"
	"errors"
	"fmt"
)

// undo records the cleanup steps of a setup done in several steps, so that a
// failure in a later step can take back what the earlier ones did. The zero value
// is ready to use; it is not safe for concurrent use (one Open owns it).
type undo struct {
	steps []undoStep
}

// undoStep is one recorded cleanup step.
type undoStep struct {
	what string // names the step in its error: "remove socket dir"
	fn   func(ctx context.Context) error
}

// add records a cleanup step; what names it in the error run returns.
func (u *undo) add(what string, fn func(ctx context.Context) error) {
	u.steps = append(u.steps, undoStep{what: what, fn: fn})
}

// run runs the recorded steps, the last one first, and forgets them. Every step
// runs even when an earlier one failed; their errors are joined. The steps share
// a fresh context bounded by teardownTimeout, because the setup's own context is
// usually why it failed (cancelled or past its deadline) while a container can
// outlive it.
func (u *undo) run() error {
	ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
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
