package swarm

import (
	"errors"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/kernelfs"
)

// SyncsFiles reports true: a session's files live in its task's /workspace
// tmpfs, which kernelbox's host never sees, so the session files API goes
// through the kernel (Placement.KernelFiles), as for the remote backend.
func (b *Backend) SyncsFiles() bool { return true }

var _ executor.KernelFiler = (*Placement)(nil)

// KernelFiles returns the session's files in its kernel's directory in the task,
// through conn (see kernelfs.Files): uploads, downloads, listings and deletes go
// through the kernel in chunks, with the workspace's per-file limit and the
// session's byte budget (the workspace's disk quota when one is set, else the
// task's /workspace tmpfs size, which the kernel cannot write past either).
func (p *Placement) KernelFiles(conn *jupyter.Conn, l executor.FileLimits) (executor.SessionFiles, error) {
	if why := p.lostReason(); why != "" {
		return nil, errors.New(why)
	}
	if l.MaxSessionBytes <= 0 {
		l.MaxSessionBytes = p.b.cfg.workSize
	}
	return p.fs.Files(conn, kernelfs.Limits{MaxFileBytes: l.MaxFileBytes, MaxSessionBytes: l.MaxSessionBytes}), nil
}
