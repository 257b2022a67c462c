package main

// Issue 46 on a real serve: what a SIGKILL or a bound does to sessions that
// keep state. The executor's continuity tests cover the rest in-process.

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// slowLoad is a namespace whose middle name takes seconds to load: a_first and
// z_last on either side of m_slow, whose __setstate__ sleeps.
const slowLoad = `class SlowLoad:
    def __setstate__(self, st):
        import time; time.sleep(6)
        self.__dict__.update(st)
a_first = 1
m_slow = SlowLoad()
m_slow.v = 2
z_last = 3
`

// Item 3: serve killed while a resume loads the snapshot. The kernel held part of
// the namespace; the next start must not hand it back as whole (nor, on local,
// call the intact snapshot lost): the session is hibernated again, and its next
// call restores every name.
func TestServeKilledMidRestore(t *testing.T) {
	py := testenv.Jupyter(t)
	testenv.Imports(t, py, "dill")
	t.Parallel()
	ws, data := testDirs(t)
	args := []string{"--backend", "local", "--python", py, "--workspace", ws, "--workdir", data, "--token", "tk"}
	cmd, url, _ := rawServe(t, args...)
	c := adoptClient(t, url)
	ctx := context.Background()
	r := adoptRun(t, c, "mr", slowLoad)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	_, err := c.Hibernate(ctx, "mr")
	require.NoError(t, err)
	go func() { _, _ = c.Resume(ctx, "mr") }()
	require.Eventually(t, func() bool {
		return sessionState(ctx, c, "mr") == api.StateRestoring
	}, time.Minute, 20*time.Millisecond, "the resume never started loading")
	time.Sleep(1500 * time.Millisecond) // a_first is back, m_slow is loading
	kill9(t, cmd)

	_, url, log := rawServe(t, args...)
	c = adoptClient(t, url)
	assert.Equal(t, api.StateHibernated, sessionState(ctx, c, "mr"), "taken back hibernated, not as a half-loaded kernel\n%s", log)
	r = adoptRun(t, c, "mr", "a_first, m_slow.v, z_last")
	assert.Equal(t, "(1, 2, 3)", r.Result, "%+v %v\n%s", r.Error, r.Notes, log)
	assert.False(t, r.StateLost, "%v", r.Notes)
	if assert.NotNil(t, r.StateRestored, "%v", r.Notes) {
		assert.ElementsMatch(t, []string{"SlowLoad", "a_first", "m_slow", "z_last"}, r.StateRestored.Restored)
	}
}

// sessionState is session id's state as GET /v1/sessions lists it ("" when it
// is not listed or the list fails).
func sessionState(ctx context.Context, c *client.Client, id string) api.SessionState {
	ss, err := c.Sessions(ctx)
	if err != nil {
		return ""
	}
	for _, s := range ss {
		if s.ID == id {
			return s.State
		}
	}
	return ""
}

// Items 5 and 6, with the default disk quota (root): hibernated sessions are never
// deleted to make room for --max-kept-sessions, and a fork of a hibernated session
// (whose disk is unmounted while it sleeps) copies its files and namespace.
func TestServeHibernatedSessionsKept(t *testing.T) {
	py := testenv.Jupyter(t)
	testenv.Imports(t, py, "dill")
	if os.Geteuid() != 0 {
		t.Skip("the disk quota (loop-mounted disks) needs root; CI runs as root")
	}
	t.Parallel()
	ws, data := testDirs(t)
	args := []string{"--backend", "local", "--python", py, "--workspace", ws, "--workdir", data, "--token", "tk", "--max-kept-sessions", "2"}
	_, url, log := rawServe(t, args...)
	c := adoptClient(t, url)
	ctx := context.Background()
	var ids []string
	for i := range 5 {
		id := fmt.Sprintf("hk-%d", i)
		ids = append(ids, id)
		r := adoptRun(t, c, id, fmt.Sprintf("x = %d\nwith open('note.txt', 'w') as f:\n    f.write('n%d')", i, i))
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		_, err := c.Hibernate(ctx, id)
		require.NoError(t, err)
	}
	res, err := c.Fork(ctx, ids[0], "hk-fork")
	require.NoError(t, err, "%s", log)
	assert.False(t, res.StateLost, "%s", res.Reason)
	r := adoptRun(t, c, "hk-fork", "print(x, open('note.txt').read())")
	assert.Equal(t, "0 n0\n", r.Stdout, "the fork has the files and variables: %+v %v", r.Error, r.Notes)
	for i, id := range ids {
		r := adoptRun(t, c, id, "print(x, open('note.txt').read())")
		assert.Equal(t, fmt.Sprintf("%d n%d\n", i, i), r.Stdout, "%s: %+v %v", id, r.Error, r.Notes)
		assert.False(t, r.StateLost, "%s: %v", id, r.Notes)
	}
}
