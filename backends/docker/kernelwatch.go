package docker

import (
	"context"
	"errors"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/procwatch"
)

var _ executor.KernelWatcher = (*Placement)(nil)

// WatchKernel finds the kernel's process among the container's, seen from the host's
// /proc (below the container's first process, by its connection file's name on its
// command line), and returns its check: one read of /proc/<pid>/stat, a few
// microseconds. It fails when the daemon's processes are not this host's (a daemon
// in a VM, or kernelbox in a container without the host's pid namespace): calls then
// go out without the check, as before. The container's own death is reported apart
// (LossReporter).
func (p *Placement) WatchKernel(_ context.Context, kernelID string) (func() bool, error) {
	if p.pid <= 0 {
		return nil, errors.New("watch kernel: the container's process id is not known")
	}
	proc, err := procwatch.FindKernel(p.pid, kernelID)
	if err != nil {
		return nil, err
	}
	p.watched.Set(proc)
	return proc.Exited, nil
}
