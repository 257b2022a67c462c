package local

import (
	"context"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/procwatch"
)

var _ executor.KernelWatcher = (*placement)(nil)

// WatchKernel finds the kernel's process below the server's supervisor (by its
// connection file's name on its command line) and returns its check: one read of
// /proc/<pid>/stat, a few microseconds.
func (p *placement) WatchKernel(_ context.Context, kernelID string) (func() bool, error) {
	proc, err := procwatch.FindKernel(p.srv.Pid(), kernelID)
	if err != nil {
		return nil, err
	}
	p.watched.Set(proc)
	return proc.Exited, nil
}
