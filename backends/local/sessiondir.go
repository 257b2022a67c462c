package local

import "github.com/kernelbox/kernelbox/executor"

var _ executor.SessionDirer = (*placement)(nil)

// KernelDir implements executor.SessionDirer: a local kernel runs on the host, in
// the session directory itself, so it sees the directory at its host path (the
// current one: a warm kernel's directory is renamed when a session takes it).
func (p *placement) KernelDir(hostDir string) string { return hostDir }
