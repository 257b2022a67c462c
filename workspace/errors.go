package workspace

import (
	"errors"
	"io/fs"

	"github.com/kernelbox/kernelbox/internal/paths"
)

// Sentinel errors. Errors returned by this package wrap them, so callers branch with
// errors.Is; the wrapping message names the file and the numbers involved.
var (
	// ErrInvalidSession means a session id does not follow api.SessionIDPattern
	// (the rule is paths.CheckSessionID's).
	ErrInvalidSession = paths.ErrInvalidSessionID

	// ErrInvalidName means a destination name is not a plain file name: it is empty,
	// "." or "..", longer than 255 bytes, or contains '/' or NUL (the rule is
	// paths.CheckName's, paths.Plain).
	ErrInvalidName = paths.ErrInvalidName

	// ErrDuplicateName means two inputs of one Stage call have the same destination name.
	ErrDuplicateName = errors.New("duplicate input name")

	// ErrNotRegular means a path names a directory, symbolic link, named pipe, device
	// or socket where a regular file is required.
	ErrNotRegular = errors.New("not a regular file")

	// ErrTooLarge means a file, or a data directory, is over its size limit.
	ErrTooLarge = errors.New("too large")

	// ErrSessionLimit means staging would bring a session's inputs over
	// Options.MaxSessionBytes.
	ErrSessionLimit = errors.New("session input limit exceeded")

	// ErrTooManyFiles means outputs/ holds more entries than Options.MaxArtifactFiles;
	// Collect copied only from the first ones it found.
	ErrTooManyFiles = errors.New("too many files")

	// ErrSkippedName means Collect left a file or directory of outputs/ out because
	// no client could download it by the name a listing gives: the name starts
	// with kernelbox's temporary prefix ".kb-tmp-" (never listed nor served), or it
	// is not valid UTF-8 (JSON shows it with U+FFFD, which names nothing).
	ErrSkippedName = errors.New("not collected")

	// ErrArtifactsFull means an artifact was refused because it would take the
	// artifacts directory over Options.MaxArtifactsTotalBytes.
	ErrArtifactsFull = errors.New("artifacts budget exceeded")

	// ErrSessionArtifactsFull means an artifact was refused because it would take
	// its session's artifacts over the session's share
	// (Options.MaxSessionArtifactsBytes). It comes wrapped with ErrArtifactsFull.
	ErrSessionArtifactsFull = errors.New("session artifacts share exceeded")

	// ErrDiskQuota means a session directory held more than Options.DiskQuota
	// after a call, on a system where the quota is not enforced by a file system
	// of the session's own; EnforceDiskQuota deleted the newest files to bring it
	// back under the limit.
	ErrDiskQuota = errors.New("disk quota exceeded")

	// ErrTooDeep means a directory in outputs/ is nested deeper than Collect descends.
	ErrTooDeep = errors.New("directory nested too deep")

	// ErrExists means the session directory an Adopt would create already exists.
	ErrExists = errors.New("session directory already exists")

	// ErrNotWarm means Adopt was given a session that did not come from Warm on the
	// same Manager, or that was already adopted or closed.
	ErrNotWarm = errors.New("not a warm session")

	// ErrConflict means AdoptFiles found an entry of the same name in the warm
	// directory and in the session's directory (other than an empty directory of
	// the warm one, which the session's entry replaces, and the template's data
	// copies under data/); nothing was moved.
	ErrConflict = errors.New("the warm directory and the session's hold an entry of the same name")

	// ErrOwnDisk means AdoptFiles was refused because each session directory is a
	// disk of its own (Options.DiskQuota): moving the files would be copying them.
	ErrOwnDisk = errors.New("session directories are disks of their own")

	// ErrStranded means an AdoptFiles that failed could not put every entry back:
	// some of the session's files are still in the warm directory, which must not
	// be removed (the error names the session, the warm directory's path and each
	// entry left there: "put back <name>: …").
	ErrStranded = errors.New("files left in the warm directory")

	// ErrInvalidPath means a requested artifact path is empty, absolute, contains a
	// "." or ".." element, or leads through a symbolic link.
	ErrInvalidPath = errors.New("invalid artifact path")

	// ErrNotFound means a requested artifact does not exist or is not a regular file.
	ErrNotFound = errors.New("artifact not found")

	// ErrLinkInPath means a path that must be opened without following links
	// (paths.OpenNoFollow) leads through a symbolic link: something on it changed
	// since it was resolved.
	ErrLinkInPath = paths.ErrLinkInPath

	// ErrPrivate means an input's source lies inside kernelbox's own state: the
	// workspace root (every session's directory), the artifacts directory, or
	// Options.PrivateDirs. Nothing there is ever staged, whatever a policy allows.
	ErrPrivate = errors.New("source is private to kernelbox")

	// ErrClosed means the Session or Manager was closed (a warm Session is closed by
	// a successful Adopt).
	ErrClosed = errors.New("workspace closed")
)

// kindError says what a path is when a regular file was required. Its message reads
// "is a directory, not a regular file", and it matches ErrNotRegular.
type kindError struct {
	kind string
}

func (e *kindError) Error() string { return "is a " + e.kind + ", not a regular file" }

func (e *kindError) Is(target error) bool { return target == ErrNotRegular }

// notRegular returns a kindError describing mode, which is not a regular file.
func notRegular(mode fs.FileMode) error {
	return &kindError{kind: kindOf(mode)}
}

// kindOf names the file type in mode for messages.
func kindOf(mode fs.FileMode) string {
	switch t := mode.Type(); {
	case t&fs.ModeDir != 0:
		return "directory"
	case t&fs.ModeSymlink != 0:
		return "symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "block device"
	case t == 0:
		return "regular file"
	default:
		return "special file"
	}
}
