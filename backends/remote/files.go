package remote

// SyncsFiles reports true: kernels on a gateway see their files only through
// the kernel's file sync (kernelfs), so the session files API, which works on
// the host session directory, refuses this backend's sessions
// (executor.ErrFilesUnsupported) rather than write files the kernel never sees.
func (b *Backend) SyncsFiles() bool { return true }
