package executor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// syncingBackend is a fakeBackend whose kernels see files only through a sync,
// as the remote backend's.
type syncingBackend struct{ *fakeBackend }

func (syncingBackend) SyncsFiles() bool { return true }

func put(ctx context.Context, e *executor.Executor, id, path, content string, create bool) error {
	op := executor.FileOp{Write: true, Create: create}
	return e.Files(ctx, id, op, func(ctx context.Context, fs executor.SessionFiles) error {
		_, err := fs.Put(ctx, path, strings.NewReader(content), api.PutOptions{})
		return err
	})
}

// TestFilesSessionLifecycle: an upload creates a session that has no kernel
// ("new"); reads of an unknown session are api.ErrNotFound; a backend whose
// kernels do not see the host directory and whose placements do not offer the
// kernel's files is refused.
func TestFilesSessionLifecycle(t *testing.T) {
	e, _ := newFakeEnv(t, nil, nil)
	ctx := context.Background()
	require.ErrorIs(t, put(ctx, e.Executor, "nobody", "x", "1", false), api.ErrNotFound)
	require.NoError(t, put(ctx, e.Executor, "f", "inputs/x.txt", "1", true))
	info, err := e.Session("f")
	require.NoError(t, err)
	assert.Equal(t, api.StateNew, info.State)
	assert.Empty(t, info.KernelID)
	require.ErrorIs(t, put(ctx, e.Executor, "bad id!", "x", "1", true), api.ErrInvalidRequest)

	// Its files are the kernel's: a placement that does not offer them
	// (not a FileSyncer) is refused once the kernel is there.
	s := newEnvOn(t, syncingBackend{newFakeBackend(t)}, nil)
	require.ErrorIs(t, put(ctx, s.Executor, "r", "x", "1", true), executor.ErrFilesUnsupported)
}
