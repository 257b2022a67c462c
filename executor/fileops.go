package executor

import (
	"context"
	"errors"
	"io"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/workspace"
)

// ErrorCode returns the api code and HTTP status of an error of the executor
// or the workspace, for every front end (HTTP, MCP) to answer alike: a session
// file's path error first (its own code, invalid_path), then the workspace's
// artifact errors (not found; an invalid artifact path or session id is an
// invalid request), then api's one table.
func ErrorCode(err error) (api.Code, int) {
	switch {
	case errors.Is(err, api.ErrInvalidPath):
		return api.CodeOf(api.ErrInvalidPath)
	case errors.Is(err, workspace.ErrNotFound):
		return api.CodeOf(api.ErrNotFound)
	case errors.Is(err, workspace.ErrInvalidPath), errors.Is(err, workspace.ErrInvalidSession):
		return api.CodeOf(api.ErrInvalidRequest)
	}
	return api.CodeOf(err)
}

// The single-file operations every front end of the files API (HTTP, MCP)
// offers, each one Files job with the right FileOp. Paths are relative to the
// session directory and checked by the workspace (workspace.CheckFilePath; no
// symbolic link followed, nothing but a regular file opened).

// PutFile writes what r yields to path in session id (creating the session),
// as workspace.Session.Put does, and returns the bytes written.
func (e *Executor) PutFile(ctx context.Context, id, path string, r io.Reader, o api.PutOptions) (int64, error) {
	var n int64
	err := e.Files(ctx, id, FileUpload, func(ctx context.Context, fs SessionFiles) error {
		var err error
		n, err = fs.Put(ctx, path, r, o)
		return err
	})
	return n, err
}

// GetFile opens the regular file at path in session id for reading, as
// workspace.Session.Get does, and returns it with its size. The file is opened
// on the session's worker and read by the caller after: a slow reader does not
// hold up the session's calls (except for a session whose files live in the
// kernel, whose worker lends its connection until the reader is closed), and
// the open file is the one checked whatever the kernel renames meanwhile. The
// caller closes it.
func (e *Executor) GetFile(ctx context.Context, id, path string) (io.ReadCloser, int64, error) {
	var f io.ReadCloser
	var size int64
	err := e.Files(ctx, id, FileRead, func(ctx context.Context, fs SessionFiles) error {
		var err error
		f, size, err = fs.Get(ctx, path)
		return err
	})
	return f, size, err
}

// ListFiles lists the directory dir ("" for the session directory) of session
// id, at most max entries, as workspace.Session.List does.
func (e *Executor) ListFiles(ctx context.Context, id, dir string, max int) (api.DirListing, error) {
	var l api.DirListing
	err := e.Files(ctx, id, FileRead, func(ctx context.Context, fs SessionFiles) error {
		var err error
		l, err = fs.List(ctx, dir, max)
		return err
	})
	return l, err
}

// RemoveFile deletes path in session id (a directory only with recursive), as
// workspace.Session.Remove does.
func (e *Executor) RemoveFile(ctx context.Context, id, path string, recursive bool) error {
	return e.Files(ctx, id, FileDelete, func(ctx context.Context, fs SessionFiles) error {
		return fs.Remove(ctx, path, recursive)
	})
}
