// Package workspace owns the session directories on the host: it stages the
// agent's input files into a session before code runs, and after each execution
// copies what the code wrote to outputs/ into a shared artifacts directory.
//
// Start reading at Manager (manager.go, its Options in options.go) and Session
// (session.go); then Stage (stage.go), Collect (collect.go walks outputs/;
// collect_file.go decides what to do with each file by what an earlier Collect
// concluded of it, and which copies were still being written, asking
// internal/procs for the processes that hold them open for writing;
// collect_copy.go writes the artifacts; display.go saves rich display data),
// the artifact lookups (artifacts.go) and AddData (data.go). disk.go decides
// when a session gets a disk of its own for Options.DiskQuota (the images and
// mounts are internal/diskimage's), quota.go holds sessions without one to the
// quota after each call, and kept.go unmounts a session's disk when its last
// handle closes and bounds how many closed sessions keep their files
// (Options.MaxKeptSessions); budget.go holds the artifacts directory to
// Options.MaxArtifactsTotalBytes and each session to its share of it.
// sessionfiles.go is the files API's host side (Session.Put in
// sessionfiles_put.go, Get, List and Remove in sessionfiles_get.go), on api's
// types (api.PutOptions, api.DirListing), which kernelfs implements in a kernel
// too: paths walked with openat O_NOFOLLOW from the session's own handle;
// restage.go skips copying an input whose stamps (internal/filestamp) say it
// has not changed; removeall.go deletes a tree the
// kernel made with a bounded number of descriptors however deep it is, and
// sweep.go removes the temporary files a killed kernelbox left in a session.
// files.go holds the low-level file operations they share; private.go keeps
// kernelbox's own directories out of staging (ErrPrivate). The rules for
// session ids, file names and paths, and the opens that follow no link at any
// component (host sources, paths below a session's handle), are
// internal/paths's, shared with the other packages.
//
// Layout:
//
//	<Root>/disks/<id>.img       session disk images (Options.DiskQuota), 0700
//	<Root>/sessions/            0700, the privacy boundary
//	<Root>/sessions/<id>/       the kernel's working directory
//	    inputs/<name>           staged files
//	    outputs/...             what the code leaves for the agent
//	    data/<name>/...         read-only copies of host data directories
//	<ArtifactsDir>/<id>/...     collected outputs, kept per session
//	<ArtifactsDir>/<id>/display/<name>  rich display data
//
// The code running in a session directory is untrusted: it runs as the same uid
// (local backend) or another one (docker backend), and may plant symlinks, FIFOs
// or devices, replace directories with links, or change files while they are
// copied. Every path inside a session directory is therefore resolved through an
// os.Root opened on it, which cannot be led outside; on top of that, files are
// Lstat-ed before they are opened, opened with O_NOFOLLOW|O_NONBLOCK and checked
// with fstat to be the same regular file, and written to a temporary name and
// renamed into place, which replaces a planted link instead of writing through it.
//
// The package is for Unix systems. It logs only through Options.Logger.
package workspace
