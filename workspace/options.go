package workspace

import (
	"io"
	"io/fs"
	"log/slog"
)

// Defaults for the zero values of Options.
const (
	DefaultMaxFileBytes     int64 = 1 << 30 // 1 GiB
	DefaultMaxSessionBytes  int64 = 4 << 30 // 4 GiB
	DefaultMaxArtifactBytes int64 = 1 << 30 // 1 GiB
	DefaultMaxArtifactFiles       = 10000
	DefaultDirMode                = fs.FileMode(0o755)
	DefaultFileMode               = fs.FileMode(0o644)
)

// Options configures a Manager. The zero value of every field except Root means
// its documented default.
type Options struct {
	// Root is the directory that holds sessions/ (required). It is created with
	// mode 0700 if missing.
	Root string

	// ArtifactsDir is the shared directory artifacts are copied to, one
	// subdirectory per session. Defaults to <Root>/artifacts.
	ArtifactsDir string

	// MaxFileBytes limits each staged input file. Defaults to 1 GiB.
	MaxFileBytes int64

	// MaxSessionBytes limits the total size of a session's staged inputs (the
	// latest size of each name staged). It is also the default limit for AddData.
	// Defaults to 4 GiB.
	MaxSessionBytes int64

	// MaxArtifactBytes limits each collected or saved artifact; bigger outputs are
	// skipped and reported in Collect's error. Defaults to 1 GiB.
	MaxArtifactBytes int64

	// MaxArtifactFiles limits how many entries (files, directories, links) one
	// Collect examines in outputs/; the rest are not collected, and Collect's
	// error says so with ErrTooManyFiles. Defaults to 10,000.
	MaxArtifactFiles int

	// DirMode is the mode of the directories the manager creates inside session
	// directories and in the artifacts tree (including ArtifactsDir itself when it
	// is created). <Root>/sessions is always 0700, which keeps other host users out
	// whatever DirMode says. Modes are set with chmod, so umask does not narrow them.
	// Defaults to 0755, so that a kernel running under another uid can read inputs
	// (backends running it as another uid chown the session directory and outputs/
	// to that uid themselves).
	DirMode fs.FileMode

	// FileMode is the mode of staged inputs and artifact files. Defaults to 0644.
	// Data copies made by AddData are always 0444 (directories 0555).
	FileMode fs.FileMode

	// PrivateDirs lists more directories no input may be staged from (ErrPrivate),
	// besides Root/sessions and ArtifactsDir, which are always private: kernelbox's own
	// state, such as its runtime directory. Protect adds more after New.
	PrivateDirs []string

	// KeepMounted lists session directories whose disks (DiskQuota) New leaves
	// mounted and does not count among the closed sessions it keeps: sessions a
	// restarted server adopts, whose containers still use their disks. Close
	// unmounts them as any other unless Manager.KeepMounted names them again.
	// Defaults to none.
	KeepMounted []string
	// Pinned lists closed session directories New keeps whatever
	// MaxKeptSessions says (see Manager.Pin): the hibernated sessions a
	// restarted server lists again. Defaults to none.
	Pinned []string

	// HashInputs computes the SHA-256 of each staged input (Staged.SHA256) while
	// copying it through user space. Without it (the default) the copy is a plain
	// copy_file_range in the kernel and Staged.SHA256 is empty. Hashing costs about
	// three times the copy itself (about 65 ms per 100 MB on a SHA-NI machine,
	// against 25 ms for the copy).
	HashInputs bool

	// DiskQuota limits the disk space of each session directory (inputs,
	// outputs, anything the code writes). Running as root with loop devices,
	// mkfs.ext4 and mount(8), each session directory is an ext4 file system of
	// its own, a sparse image of this size under <Root>/disks loop-mounted on
	// it, so the code gets ENOSPC at the limit and the host never loses more
	// than that per session. Otherwise (DiskQuota reports why) only
	// EnforceDiskQuota, which the executor runs after each call, holds a session
	// to it. Defaults to 0: no limit.
	DiskQuota int64

	// DiskQuotaCheckOnly holds sessions to DiskQuota with EnforceDiskQuota
	// alone, without disks of their own, as when not running as root.
	DiskQuotaCheckOnly bool

	// MaxArtifactsTotalBytes limits the total size of the artifacts directory,
	// all sessions together. An artifact that would take it over the limit is
	// refused (not collected or saved) with ErrArtifactsFull in Collect's or
	// SaveDisplay's error; nothing already collected is evicted. Defaults to 0:
	// no limit.
	MaxArtifactsTotalBytes int64

	// MaxSessionArtifactsBytes limits the artifacts of one session: its part of
	// the artifacts directory, all its calls and display data together. An
	// artifact that would take it over is refused like one over
	// MaxArtifactsTotalBytes (ErrSessionArtifactsFull, which matches
	// ErrArtifactsFull too); a single file bigger than the whole share is
	// reported once per version, as one over MaxArtifactBytes is. It is never
	// more than half of MaxArtifactsTotalBytes when that is set, so that no
	// session alone can fill the artifacts directory and have another's
	// artifacts refused. Defaults to DiskQuota (a session may keep as artifacts
	// what it may keep on its disk), else that half; negative means the half
	// only, or no limit without a total.
	MaxSessionArtifactsBytes int64

	// MaxKeptSessions bounds, when DiskQuota is set, how many closed session
	// directories are kept (kept.go): a directory whose last Session closed
	// without Remove (the executor closed it for being idle, or shut down) keeps
	// its files for the session's next incarnation, its disk unmounted but its
	// image kept. Past this many, the one closed longest ago is deleted with its
	// image (its artifacts stay), so session disks take at most (open sessions +
	// MaxKeptSessions) × DiskQuota of the host. Defaults to 32; negative keeps
	// none (a directory is deleted when its last Session closes).
	MaxKeptSessions int

	// RemoveArtifacts makes Remove delete the session's artifacts along with its
	// directory. Defaults to false: artifacts stay after their session is
	// removed, until the operator deletes them.
	RemoveArtifacts bool

	// Logger receives the manager's logs (skipped symlinks and special files,
	// cleanup failures) with a "session" attribute. Defaults to discarding them.
	Logger *slog.Logger
}

func withDefaults(o Options) Options {
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.MaxSessionBytes <= 0 {
		o.MaxSessionBytes = DefaultMaxSessionBytes
	}
	if o.MaxArtifactBytes <= 0 {
		o.MaxArtifactBytes = DefaultMaxArtifactBytes
	}
	if o.MaxArtifactFiles <= 0 {
		o.MaxArtifactFiles = DefaultMaxArtifactFiles
	}
	if o.MaxKeptSessions == 0 {
		o.MaxKeptSessions = DefaultMaxKeptSessions
	}
	if o.DirMode == 0 {
		o.DirMode = DefaultDirMode
	}
	if o.FileMode == 0 {
		o.FileMode = DefaultFileMode
	}
	o.DirMode &= fs.ModePerm
	o.FileMode &= fs.ModePerm
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}
