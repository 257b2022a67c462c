package executor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// writeTree makes files (slash paths, "" content) below dir.
func writeTree(t testing.TB, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("content of "+f), 0o644))
	}
}

// newWithData builds an executor (no backend: the data check runs first) on
// a workspace of its own, with the built-in policy and extra rules, work as
// the working directory.
func newWithData(t testing.TB, work string, extra []permissions.Rule, mod func(*executor.Options)) (*executor.Executor, error) {
	t.Helper()
	ws, err := workspace.New(workspace.Options{Root: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	o := executor.Options{
		Workspace: ws,
		Permissions: &permissions.Engine{
			Policy: permissions.NewPolicy(append(permissions.DefaultRules(), extra...)...),
			Vars:   permissions.Vars{Workdir: work, Home: filepath.Join(t.TempDir(), "home"), Artifacts: ws.ArtifactsDir()},
		},
	}
	mod(&o)
	e, err := executor.New(o)
	if err == nil {
		t.Cleanup(func() { _ = e.Close() })
	}
	return e, err
}

// TestDataMountCredentials is issue 33 item 5: a data directory holding what
// the policy denies as inputs (.env, nested/id_rsa) is refused when the
// executor is built, for Options.Data and for a template's data alike, the
// error naming each entry and its rule; before, the kernel read them in full
// (a copy on local, a bind mount on docker). Ordinary files do not count; a
// denied directory is named once, not file by file; a symbolic link is judged
// by its own name and never followed; the list is bounded; and an allow of the
// exact paths lets the directory through.
func TestDataMountCredentials(t *testing.T) {
	work := t.TempDir()
	dir := filepath.Join(work, "d")
	writeTree(t, dir, ".env", "nested/id_rsa", "table.csv", "nested/ok.json", "keys/.ssh/config", "keys/.ssh/known_hosts")
	require.NoError(t, os.Symlink("/etc/shadow", filepath.Join(dir, "nested", "shadow-link")))
	// A link named like a key, pointing at ordinary data in the directory.
	require.NoError(t, os.Symlink("table.csv", filepath.Join(dir, "server.pem")))
	mount := []executor.DataMount{{Name: "d", HostDir: dir}}
	wantIn := func(t *testing.T, err error) {
		t.Helper()
		require.Error(t, err)
		t.Logf("refused: %v", err)
		require.ErrorIs(t, err, permissions.ErrDenied)
		var de *permissions.DeniedError
		require.True(t, errors.As(err, &de))
		msg := err.Error()
		for _, w := range []string{
			`data mount "d": ` + dir + ` holds 4 entries that the permission policy denies as inputs`,
			filepath.Join(dir, ".env") + `: denied by rule "environment files" (builtin)`,
			filepath.Join(dir, "nested", "id_rsa") + `: denied by rule "SSH keys" (builtin)`,
			filepath.Join(dir, "keys", ".ssh") + `: denied by rule "SSH keys" (builtin)`,
			filepath.Join(dir, "server.pem") + `: denied by rule "private keys and keystores" (builtin)`,
			"move them out of the directory",
		} {
			assert.Contains(t, msg, w)
		}
		assert.NotContains(t, msg, "table.csv")
		assert.NotContains(t, msg, "ok.json")
		assert.NotContains(t, msg, "known_hosts", "a denied directory is named once")
		assert.NotContains(t, msg, "shadow", "a link is not followed")
	}

	t.Run("options data", func(t *testing.T) {
		_, err := newWithData(t, work, nil, func(o *executor.Options) { o.Data = mount })
		wantIn(t, err)
	})
	t.Run("template data", func(t *testing.T) {
		_, err := newWithData(t, work, nil, func(o *executor.Options) {
			o.Templates = []executor.Template{{Name: "withdata", Data: mount}}
		})
		wantIn(t, err)
		require.ErrorContains(t, err, `template "withdata": `)
	})
	t.Run("exact allows", func(t *testing.T) {
		var allow []permissions.Rule
		for _, p := range []string{".env", "nested/id_rsa", "server.pem"} {
			allow = append(allow, permissions.Rule{Effect: permissions.Allow, Capability: permissions.FilesystemRead,
				Target: filepath.Join(dir, filepath.FromSlash(p)), Reason: "test fixture"})
		}
		// The .ssh directory is not a single file an exact allow re-opens file
		// by file: it stays denied.
		_, err := newWithData(t, work, allow, func(o *executor.Options) { o.Data = mount })
		require.ErrorContains(t, err, "holds 1 entry that")
		require.ErrorContains(t, err, filepath.Join(dir, "keys", ".ssh")+": ")
		require.NoError(t, os.RemoveAll(filepath.Join(dir, "keys")))
		defer writeTree(t, dir, "keys/.ssh/config", "keys/.ssh/known_hosts")
		_, err = newWithData(t, work, allow, func(o *executor.Options) { o.Data = mount })
		require.NoError(t, err)
	})
	t.Run("bounded list", func(t *testing.T) {
		many := filepath.Join(work, "many")
		for i := range 25 {
			writeTree(t, many, fmt.Sprintf("k%02d.key", i))
		}
		_, err := newWithData(t, work, nil, func(o *executor.Options) {
			o.Data = []executor.DataMount{{Name: "many", HostDir: many}}
		})
		require.ErrorContains(t, err, "holds 25 entries that the permission policy denies as inputs (the first 10 listed)")
		require.Equal(t, 10, strings.Count(err.Error(), ".key: denied by"), "%v", err)
	})
}

// TestDataMountRecheckedPerSession is issue 47 item 2: a data directory that
// was clean when the executor was built and later gains a .env and an SSH key
// is checked again as each session gets a kernel: a new session is refused
// (api.ErrDenied), told each entry and its rule, instead of seeing them; once the
// directory is clean again, sessions start. Before, the check ran only once,
// at start.
func TestDataMountRecheckedPerSession(t *testing.T) {
	var dir string
	e, _ := newFakeEnv(t, nil, func(o *executor.Options) {
		dir = filepath.Join(o.Permissions.Vars.Workdir, "ref")
		writeTree(t, dir, "table.csv")
		o.Data = []executor.DataMount{{Name: "ref", HostDir: dir}}
	})
	ctx := context.Background()
	r, err := e.Execute(ctx, api.Request{SessionID: "before", Code: "1"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status)

	writeTree(t, dir, ".env", ".ssh/id_ed25519")
	_, err = e.Execute(ctx, api.Request{SessionID: "after", Code: "1"})
	require.ErrorIs(t, err, permissions.ErrDenied)
	require.ErrorIs(t, err, api.ErrDenied, "the API answers 403 permission_denied")
	t.Logf("refused: %v", err)
	for _, w := range []string{"checked again as each session's kernel starts", `data mount "ref"`, "holds 2 entries",
		filepath.Join(dir, ".env") + `: denied by rule "environment files"`, filepath.Join(dir, ".ssh") + `: denied by rule "SSH keys"`} {
		assert.Contains(t, err.Error(), w)
	}
	_, statErr := os.Stat(filepath.Join(e.WS.Root(), "sessions", "after", "data", "ref", ".env"))
	assert.True(t, os.IsNotExist(statErr), "the refused session got no copy of the .env")

	// The live session keeps its kernel (and the files it was given).
	r, err = e.Execute(ctx, api.Request{SessionID: "before", Code: "2"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status)

	require.NoError(t, os.Remove(filepath.Join(dir, ".env")))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, ".ssh")))
	r, err = e.Execute(ctx, api.Request{SessionID: "after", Code: "1"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status)
}
