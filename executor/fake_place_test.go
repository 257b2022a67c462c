package executor_test

// The optional placement abilities on the fake backend (LossReporter, Diagnoser,
// FileSyncer), display artifacts and idle culling.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// A placement that reports its server lost during a call: the call ends at once as
// kernel_died with the placement's reason; the next call starts a kernel on a new
// placement and says the state is lost. The lost kernel is not reconnected to.
func TestFakeLossReporter(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, func(b *fakeBackend) { b.lossy = true }, nil)
	e.run(t, "l", "set x 1")
	c := e.start(t, context.Background(), req("l", "sleep 1m"))
	k := waitCell(t, e, b, "l")
	start := time.Now()
	b.placements()[0].lose("the gateway left the rotation")
	r, err := c.wait(t)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, api.StatusKernelDied, r.Status)
	assert.Equal(t, "the kernel died during the call: the gateway left the rotation; the next call starts a fresh kernel", r.Error.Evalue)
	assert.True(t, r.StateLost)

	sessions := len(k.Sessions())
	r = e.run(t, "l", "get x")
	assert.Equal(t, "NameError", r.Error.Ename)
	assert.True(t, r.StateLost)
	require.Len(t, b.placements(), 2, "a new placement")
	assert.True(t, b.placements()[0].isClosed(), "the lost placement is released")
	assert.Equal(t, sessions, len(k.Sessions()), "the lost kernel was not reconnected to")
}

// A FileSyncer placement is asked to set up a fresh kernel and push staged inputs,
// gets the outputs probe's result after each call that answered it (nil after an
// exception) and pulls before artifacts are collected.
func TestFakeFileSyncer(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, func(b *fakeBackend) { b.sync = true }, nil)
	in := filepath.Join(e.Data, "in.csv")
	require.NoError(t, os.WriteFile(in, []byte("a,b\n"), 0o644))

	r := e.run(t, "f", "print one")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Len(t, r.Artifacts, 1, "the pulled file is collected")
	assert.Equal(t, "pulled.txt", r.Artifacts[0].Name)

	r, err := e.Execute(context.Background(), api.Request{SessionID: "f", Code: "print two", Inputs: []string{in}})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status)
	assert.Contains(t, r.Notes, "staged inputs/in.csv (4 bytes)")

	r = e.run(t, "f", "raise")
	require.Equal(t, api.StatusError, r.Status)
	assert.Empty(t, r.Artifacts, "no probe result: nothing pulled")

	p := b.placements()[0]
	sp, ok := e.placement(t, b, p)
	require.True(t, ok)
	pushes, probes := sp.record()
	assert.Equal(t, [][]string{nil, {"in.csv"}}, pushes, "a fresh kernel's setup, then the staged input")
	require.Len(t, probes, 3)
	for i, want := range []string{`"'changed'"`, `"'changed'"`, ""} {
		if want == "" {
			assert.Nil(t, probes[i], "call %d", i)
			continue
		}
		var v struct {
			Data map[string]json.RawMessage `json:"data"`
		}
		require.NoError(t, json.Unmarshal(probes[i], &v), "call %d", i)
		assert.Equal(t, want, string(v.Data["text/plain"]), "call %d", i)
	}
}

// placement returns the FileSyncer the executor was given for p.
func (e *env) placement(t *testing.T, b *fakeBackend, p *fakePlacement) (*syncingPlacement, bool) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	sp, ok := b.syncing[p]
	return sp, ok
}

// Rich display data of every api.RichTypes type is saved as an artifact (a GIF too),
// and each output names the artifact its data was saved as.
func TestFakeDisplayArtifacts(t *testing.T) {
	t.Parallel()
	e, _ := newFakeEnv(t, nil, nil)
	r := e.run(t, "d", "png\ngif\nhtml\nprint text only")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Len(t, r.Artifacts, 3)
	byMIME := map[string]api.Artifact{}
	for _, a := range r.Artifacts {
		byMIME[a.MIME] = a
		assert.True(t, strings.HasPrefix(a.Name, "display/cell1-"), a.Name)
	}
	gif, ok := byMIME["image/gif"]
	require.True(t, ok, "a GIF is saved: %+v", r.Artifacts)
	assert.True(t, strings.HasSuffix(gif.Name, ".gif"))
	data, err := os.ReadFile(gif.Path)
	require.NoError(t, err)
	assert.Equal(t, "fake gif bytes", string(data), "decoded from base64")

	var displays []api.Output
	for _, o := range r.Outputs {
		if o.OutputType == "display_data" {
			displays = append(displays, o)
		}
	}
	require.Len(t, displays, 3)
	for i, mt := range []string{"image/png", "image/gif", "text/html"} {
		assert.Equal(t, map[string]string{mt: byMIME[mt].Name}, displays[i].Artifacts, mt)
	}
	js, err := json.Marshal(displays[1])
	require.NoError(t, err)
	assert.NotContains(t, string(js), "display/", "nbformat JSON unchanged")
}

// A session idle past IdleTimeout is closed; a later call on its id gets a fresh
// kernel and is told its state is gone.
func TestFakeIdleCulled(t *testing.T) {
	t.Parallel()
	e, b := newFakeEnv(t, nil, func(o *executor.Options) { o.IdleTimeout = 500 * time.Millisecond })
	e.run(t, "i", "set x 1")
	require.Eventually(t, func() bool {
		_, err := e.Session("i")
		return err != nil
	}, 10*time.Second, 20*time.Millisecond, "culled")
	require.Eventually(t, b.placements()[0].isClosed, 10*time.Second, 10*time.Millisecond, "the culled session's placement is released")
	r := e.run(t, "i", "get x")
	assert.Equal(t, "NameError", r.Error.Ename)
	assert.True(t, r.StateLost)
	require.NotEmpty(t, r.Notes)
	assert.Contains(t, r.Notes[0], "idle for over 500ms")
}
