package remote

import (
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/kernelfs"
)

// SyncsFiles reports true: kernels on a gateway see their files only through
// the kernel's file sync (kernelfs), so the session files API goes through the
// kernel for this backend's sessions (Placement.KernelFiles) instead of the
// host session directory, which the kernel never sees.
func (b *Backend) SyncsFiles() bool { return true }

var _ executor.KernelFiler = (*Placement)(nil)

// KernelFiles returns the session's files in its kernel's directory on the
// gateway, through conn (see kernelfs.Files): uploads, downloads, listings and
// deletes go through the kernel, in chunks, with the workspace's per-file limit
// and the session's byte budget (the workspace's disk quota when one is set,
// else Options.MaxSessionBytes), since a gateway's disk has no quota of
// kernelbox's.
func (p *Placement) KernelFiles(conn *jupyter.Conn, l executor.FileLimits) (executor.SessionFiles, error) {
	if err := p.see(conn); err != nil {
		return nil, err
	}
	return p.fs.Files(conn, kernelfs.Limits{MaxFileBytes: l.MaxFileBytes, MaxSessionBytes: l.MaxSessionBytes}), nil
}
