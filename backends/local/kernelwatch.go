package local

import (
	"context"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/procwatch"
	"github.com/kernelbox/kernelbox/internal/serverflags"
)

var _ executor.KernelWatcher = (*placement)(nil)

// WatchKernel finds the kernel's process, the server's child whose command line
// names its connection file (the server found below its supervisor by
// procwatch.FindServer, so no process a cell starts can pose as either), and returns
// its check: one read of /proc/<pid>/stat, a few microseconds.
func (p *placement) WatchKernel(_ context.Context, kernelID string) (func() bool, error) {
	server, err := procwatch.FindServer(p.srv.Pid(), serverflags.LauncherName)
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
