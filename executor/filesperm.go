package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/permissions"
)

// FileOp says what a Files call does with the session's files: which
// capabilities the policy must allow (permissions.FilesRead to download or
// list, permissions.FilesWrite to upload or delete) and whether a session that
// does not exist yet is created. Filesystem.read does not apply: the files API
// moves bytes between a client and the session, it never reads a host path the
// client names.
type FileOp struct {
	// Read: the call downloads files or lists directories.
	Read bool
	// Write: the call uploads or deletes files.
	Write bool
	// Create: a session that does not exist yet is created, as Execute does;
	// otherwise a missing session is api.ErrNotFound.
	Create bool
}

// Common FileOps.
var (
	// FileRead downloads or lists; the session must exist.
	FileRead = FileOp{Read: true}
	// FileUpload uploads, creating the session.
	FileUpload = FileOp{Write: true, Create: true}
	// FileDelete deletes; the session must exist.
	FileDelete = FileOp{Write: true}
)

// checkFiles asks the permission engine whether op may run on session id. A
// denial wraps api.ErrDenied and is a *permissions.DeniedError; nothing has been
// looked up, created or touched yet.
func (e *Executor) checkFiles(ctx context.Context, id string, op FileOp) error {
	if !op.Read && !op.Write {
		return fmt.Errorf("%w: a files operation must read or write", api.ErrInvalidRequest)
	}
	if _, err := e.perm.Check(ctx, permissions.FilesCapabilities(op.Read, op.Write), nil); err != nil {
		if errors.Is(err, permissions.ErrDenied) {
			return fmt.Errorf("%w: session files of %q: %w", api.ErrDenied, id, err)
		}
		return err
	}
	return nil
}
