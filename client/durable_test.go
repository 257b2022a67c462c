package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// TestClientHibernateResumeFork drives hibernate, resume and fork over HTTP: the
// listing shows the hibernated state and snapshot, errors come back as their
// sentinels.
func TestClientHibernateResumeFork(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	c, _, _ := newServer(t)
	ctx := context.Background()

	_, err := c.CreateSession(ctx, "h0", "")
	require.NoError(t, err)
	_, err = c.Hibernate(ctx, "h0")
	require.ErrorIs(t, err, api.ErrCannotHibernate, "a session that never started a kernel has nothing to save")
	_, err = c.Hibernate(ctx, "nope")
	require.ErrorIs(t, err, api.ErrNotFound)

	res, err := c.Execute(ctx, api.Request{SessionID: "h1", Code: "x = 41\nf = lambda: x + 1"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, res.Status)
	info, err := c.Hibernate(ctx, "h1")
	require.NoError(t, err)
	require.Equal(t, api.StateHibernated, info.State)
	require.ElementsMatch(t, []string{"f", "x"}, info.Snapshot.Names)
	list, err := c.Sessions(ctx)
	require.NoError(t, err)
	var seen bool
	for _, s := range list {
		if s.ID == "h1" {
			seen = true
			require.Equal(t, api.StateHibernated, s.State)
			require.Positive(t, s.Snapshot.Bytes)
		}
	}
	require.True(t, seen)

	fk, err := c.Fork(ctx, "h1", "h2")
	require.NoError(t, err)
	require.Equal(t, "fork:h1", fk.StateRestored.From)
	rs, err := c.Resume(ctx, "h1")
	require.NoError(t, err)
	require.True(t, rs.Resumed)
	require.ElementsMatch(t, []string{"f", "x"}, rs.StateRestored.Restored)
	for _, id := range []string{"h1", "h2"} {
		res, err = c.Execute(ctx, api.Request{SessionID: id, Code: "f()"})
		require.NoError(t, err)
		require.Equal(t, "42", res.Result, id)
	}
	_, err = c.Fork(ctx, "h1", "bad id")
	require.ErrorIs(t, err, api.ErrInvalidRequest)
}
