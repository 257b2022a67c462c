package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/client"
)

// nobody is the uid and gid the second user runs as.
const nobody = "65534"

// requireRoot skips t when the test cannot switch users, unless it runs in CI
// (CI=true, which runs as root), where that is a failure: CI must never pass by
// skipping.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but the test runs as uid %d: it needs root to run a second uid with setpriv", os.Geteuid())
	}
	t.Skipf("skipping: needs root to run a second uid with setpriv (uid %d)", os.Geteuid())
}

// sharedBin copies the kernelbox binary where another uid can run it (the test's
// build dir is 0700).
func sharedBin(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kernelbox-shared-bin")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	b, err := os.ReadFile(kernelboxBin(t))
	require.NoError(t, err)
	bin := filepath.Join(dir, "kernelbox")
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	return bin
}

// cli runs the kernelbox CLI with env (and nothing of the test's own environment
// but PATH), as the user setpriv makes it when asUID is set, and returns its
// combined output and exit code.
func cli(t testing.TB, bin string, env []string, asUID string, args ...string) (string, int) {
	t.Helper()
	argv := append([]string{bin}, args...)
	if asUID != "" {
		argv = append([]string{"setpriv", "--reuid=" + asUID, "--regid=" + asUID, "--clear-groups", "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "running %v: %s", argv, out)
		return string(out), ee.ExitCode()
	}
	return string(out), 0
}

// TestServeSecondUID is issue 20 item 2 with a real second uid: `kernelbox serve`
// started without --token on 127.0.0.1 (the quick start) keeps its token where
// only its own user can read it. The kernelbox CLI run as uid 65534 (setpriv) gets
// 401 from `sessions` and `exec`, with its own home and even when pointed at the
// serving user's runtime dir; nothing runs. The same CLI run as the serving uid,
// with no token flag or variable, finds the token and works.
func TestServeSecondUID(t *testing.T) {
	requireRoot(t)
	_, err := exec.LookPath("setpriv")
	require.NoError(t, err, "setpriv (util-linux) is needed to run a second uid")
	rt := t.TempDir()
	s := startServeWith(t, serveOpts{runtimeDir: rt})
	bin := sharedBin(t)

	home, err := os.MkdirTemp("", "kernelbox-nobody-home")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	require.NoError(t, os.Chown(home, 65534, 65534))
	payload := filepath.Join(home, "payload.txt")
	require.NoError(t, os.WriteFile(payload, []byte("from another uid"), 0o644))
	require.NoError(t, os.Chown(payload, 65534, 65534))
	others := map[string][]string{
		"its own home":                   {"HOME=" + home},
		"the serving user's runtime dir": {"HOME=" + home, "XDG_RUNTIME_DIR=" + rt},
	}
	// The owner's session holds a file the other uid must not read.
	mine := []string{"HOME=" + os.Getenv("HOME"), "XDG_RUNTIME_DIR=" + rt}
	out, code := cli(t, bin, mine, "", "exec", "--server", s.URL, "--session", "owner", "-c", "open('secret.txt', 'w').write('kept by the owner')")
	require.Equal(t, 0, code, "exec as the serving uid: %s", out)
	for name, env := range others {
		t.Run("uid 65534 with "+name, func(t *testing.T) {
			out, code := cli(t, bin, env, nobody, "sessions", "--server", s.URL)
			t.Logf("sessions as uid %s: exit %d: %s", nobody, code, strings.TrimSpace(out))
			assert.NotEqual(t, 0, code)
			assert.Contains(t, out, "unauthorized (401)")
			out, code = cli(t, bin, env, nobody, "exec", "--server", s.URL, "--session", "intruder", "-c", "print('ran as', 6 * 7)")
			t.Logf("exec as uid %s: exit %d: %s", nobody, code, strings.TrimSpace(out))
			assert.NotEqual(t, 0, code)
			assert.Contains(t, out, "unauthorized (401)")
			assert.NotContains(t, out, "ran as 42")
			assert.NotContains(t, out, "kernelbox: kernelbox:", "the error is prefixed twice")
			// The session files and templates routes: the same refusal, nothing written.
			for _, args := range [][]string{
				{"cp", "--server", s.URL, filepath.Join(home, "payload.txt"), "intruder:planted.txt"},
				{"ls", "--server", s.URL, "owner"},
				{"cp", "--server", s.URL, "owner:secret.txt", "-"},
				{"templates", "--server", s.URL},
			} {
				out, code := cli(t, bin, env, nobody, args...)
				t.Logf("%s as uid %s: exit %d: %s", args[0], nobody, code, strings.TrimSpace(out))
				assert.NotEqual(t, 0, code, "%v", args)
				assert.Contains(t, out, "unauthorized (401)", "%v", args)
				assert.NotContains(t, out, "kept by the owner", "%v", args)
				assert.Equal(t, 1, strings.Count(out, "kernelbox:"), "the error is prefixed once: %s", out)
			}
		})
	}

	// The serving uid needs no token flag: the CLI reads the runtime file.
	out, code = cli(t, bin, mine, "", "exec", "--server", s.URL, "--session", "owner", "-c", "print('ran as', 6 * 7)")
	require.Equal(t, 0, code, "exec as the serving uid: %s", out)
	require.Contains(t, out, "ran as 42")
	out, code = cli(t, bin, mine, "", "sessions", "--server", s.URL)
	require.Equal(t, 0, code, "sessions as the serving uid: %s", out)
	require.Contains(t, out, "owner")

	// Only the owner's session exists.
	require.NotEmpty(t, s.Token, "serve kept no token in %s", rt)
	c, err := client.New(s.URL, &client.Options{Token: s.Token})
	require.NoError(t, err)
	list, err := c.Sessions(context.Background())
	require.NoError(t, err)
	var ids []string
	for _, si := range list {
		ids = append(ids, si.ID)
	}
	require.Equal(t, []string{"owner"}, ids)
}
