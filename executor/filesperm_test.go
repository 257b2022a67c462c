package executor_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/permissions"
)

// withPolicy sets a policy of the built-in rules plus extra.
func withPolicy(extra ...permissions.Rule) func(*executor.Options) {
	return func(o *executor.Options) {
		p := *o.Permissions
		p.Policy = permissions.NewPolicy(append(permissions.DefaultRules(), extra...)...)
		o.Permissions = &p
	}
}

// TestFilesPolicy: the files API is allowed by the built-in policy; a policy
// that denies files.write refuses uploads and deletes with api.ErrDenied (a
// *permissions.DeniedError) before anything is created or written, and still
// lets files be read; one that denies files.read refuses downloads and
// listings but not uploads.
func TestFilesPolicy(t *testing.T) {
	ctx := context.Background()
	sessionDir := func(e *env, id string) string { return filepath.Join(e.WS.Root(), "sessions", id) }

	t.Run("defaults allow", func(t *testing.T) {
		e, _ := newFakeEnv(t, nil, nil)
		_, err := e.PutFile(ctx, "a", "inputs/x.txt", strings.NewReader("1"), api.PutOptions{})
		require.NoError(t, err)
		f, _, err := e.GetFile(ctx, "a", "inputs/x.txt")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.NoError(t, e.RemoveFile(ctx, "a", "inputs/x.txt", false))
	})

	t.Run("deny write", func(t *testing.T) {
		e, _ := newFakeEnv(t, nil, withPolicy(permissions.Rule{Effect: permissions.Deny, Capability: permissions.FilesWrite, Reason: "read-only files", Source: "test"}))
		_, err := e.PutFile(ctx, "w", "inputs/x.txt", strings.NewReader("secret plan"), api.PutOptions{})
		require.ErrorIs(t, err, api.ErrDenied)
		var denied *permissions.DeniedError
		require.True(t, errors.As(err, &denied), "%v", err)
		assert.Contains(t, err.Error(), "read-only files")
		_, err = e.Session("w")
		require.ErrorIs(t, err, api.ErrNotFound, "a denied upload creates no session")
		_, err = os.Lstat(sessionDir(e, "w"))
		require.ErrorIs(t, err, os.ErrNotExist, "a denied upload writes nothing")

		// A session made by execute: its files can be read, not deleted.
		_, err = e.Execute(ctx, req("w", "1"))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(sessionDir(e, "w"), "inputs"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(sessionDir(e, "w"), "inputs", "k.txt"), []byte("kept"), 0o644))
		require.ErrorIs(t, e.RemoveFile(ctx, "w", "inputs/k.txt", false), api.ErrDenied)
		f, _, err := e.GetFile(ctx, "w", "inputs/k.txt")
		require.NoError(t, err, "files.read is still allowed")
		require.NoError(t, f.Close())
		_, err = e.PutFile(ctx, "w", "inputs/k.txt", strings.NewReader("overwritten"), api.PutOptions{})
		require.ErrorIs(t, err, api.ErrDenied)
		b, err := os.ReadFile(filepath.Join(sessionDir(e, "w"), "inputs", "k.txt"))
		require.NoError(t, err)
		assert.Equal(t, "kept", string(b), "a denied upload leaves the file as it was")
	})

	t.Run("deny read", func(t *testing.T) {
		e, _ := newFakeEnv(t, nil, withPolicy(permissions.Rule{Effect: permissions.Deny, Capability: permissions.FilesRead, Reason: "no downloads", Source: "test"}))
		_, err := e.PutFile(ctx, "r", "inputs/x.txt", strings.NewReader("1"), api.PutOptions{})
		require.NoError(t, err, "files.write is still allowed")
		_, _, err = e.GetFile(ctx, "r", "inputs/x.txt")
		require.ErrorIs(t, err, api.ErrDenied)
		_, err = e.ListFiles(ctx, "r", "", 0)
		require.ErrorIs(t, err, api.ErrDenied)
		// A batch that reads as well as writes needs both.
		err = e.Files(ctx, "r", executor.FileOp{Read: true, Write: true, Create: true}, nil)
		require.ErrorIs(t, err, api.ErrDenied)
	})

	t.Run("an op that neither reads nor writes", func(t *testing.T) {
		e, _ := newFakeEnv(t, nil, nil)
		require.ErrorIs(t, e.Files(ctx, "n", executor.FileOp{Create: true}, nil), api.ErrInvalidRequest)
	})
}
