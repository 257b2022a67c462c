package docker

import (
	"context"
	"errors"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/procwatch"
	"github.com/kernelbox/kernelbox/internal/serverflags"
)

var _ executor.KernelWatcher = (*Placement)(nil)

// WatchKernel finds the kernel's process among the container's, seen from the host's
// /proc (the child of the container's server whose command line names its
// connection file; the server found below the container's first process by
// procwatch.FindServer, so no process a cell starts can pose as either), and returns its check: one read of /proc/<pid>/stat, a few
// microseconds. It fails when the daemon's processes are not this host's (a daemon
// in a VM, or kernelbox in a container without the host's pid namespace): calls then
// go out without the check, as before. The container's own death is reported apart
// (LossReporter).
func (p *Placement) WatchKernel(_ context.Context, kernelID string) (func() bool, error) {
	if p.pid <= 0 {
		return nil, errors.New("watch kernel: the container's process id is not known")
	}
	server, err := procwatch.FindServer(p.pid, serverflags.LauncherName)
	if err != nil {
		return nil, err
	}
	proc, err := procwatch.FindKernel(server, kernelID)
	if err != nil {
		return nil, err
	}
	p.watched.Set(proc)
	return proc.Exited, nil
}
