// Package none is the backend that runs nothing: every call fails closed with an error
// that says how to enable a real backend. It is what kernelbox uses when no backend is
// chosen, so that a misconfiguration never falls back to running code unsandboxed.
package none

import (
	"context"
	"fmt"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// Backend refuses to place sessions.
type Backend struct{}

var (
	_ executor.Backend       = (*Backend)(nil)
	_ executor.HealthChecker = (*Backend)(nil)
)

// New returns the none backend.
func New() *Backend { return &Backend{} }

// Name returns "none".
func (*Backend) Name() string { return "none" }

// Open always fails with an error wrapping api.ErrDisabled.
func (*Backend) Open(context.Context, executor.SessionSpec) (executor.Placement, error) {
	return nil, errDisabled()
}

// Health reports that execution is disabled.
func (*Backend) Health(context.Context) error { return errDisabled() }

// Close does nothing.
func (*Backend) Close(context.Context) error { return nil }

func errDisabled() error {
	return fmt.Errorf("%w: the backend is \"none\"; start kernelbox with --backend docker (sandboxed) or --backend local (unsandboxed: code runs with your user's rights)", api.ErrDisabled)
}
