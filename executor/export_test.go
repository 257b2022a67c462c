package executor

import "github.com/kernelbox/kernelbox/workspace"

// SetAdoptFiles makes e's warm pools move a hibernated session's files into a warm
// directory with adopt instead of Options.Workspace.AdoptFiles, so that a test of
// package executor_test can make the move fail as the workspace can (with
// workspace.ErrStranded, which no real file system failure produces on demand).
// Call it before the session resumes; it is not safe for concurrent use with
// resumes.
func SetAdoptFiles(e *Executor, adopt func(*workspace.Session, string) (*workspace.Session, error)) {
	e.adoptFiles = adopt
}
