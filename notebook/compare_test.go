package notebook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/notebook"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/notebooks/golden")

// fixtureNames are the test notebooks run by kernelbox and by nbclient.
var fixtureNames = []string{
	"streams", "errors", "rich", "clear_output", "display_updates", "unicode", "empty", "parameters", "fail",
}

// TestRunMatchesNbclient runs every test notebook with kernelbox and with nbclient and
// requires the same cells, execution counts and outputs (normalized: see normalize),
// the same as the golden file, and a valid nbformat file.
func TestRunMatchesNbclient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	py := nbPython(t)

	// nbclient takes a while (a kernel per notebook): run it alongside.
	type nbclientRun struct {
		dir string
		out []byte
		err error
	}
	ncDone := make(chan nbclientRun, 1)
	go func() {
		dir, cwd := t.TempDir(), t.TempDir()
		args := []string{"-c", nbclientScript, dir, cwd}
		for _, n := range fixtureNames {
			args = append(args, filepath.Join(fixtures, n+".ipynb"))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, py, args...).CombinedOutput()
		ncDone <- nbclientRun{dir, out, err}
	}()

	ours := map[string][]byte{}
	for _, name := range fixtureNames {
		nb := readFixture(t, name)
		rep, err := notebook.Run(context.Background(), e.Executor, nb, notebook.RunOptions{})
		require.NoError(t, err, name)
		if name == "fail" {
			require.Equal(t, api.StatusError, rep.Status)
		} else {
			require.Equal(t, api.StatusOK, rep.Status, "%s: %+v", name, rep.Error)
		}
		b, err := nb.Encode()
		require.NoError(t, err)
		ours[name] = b
	}
	nc := <-ncDone
	require.NoError(t, nc.err, "nbclient: %s", nc.out)

	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name+".ipynb")
			require.NoError(t, os.WriteFile(path, ours[name], 0o644))
			validate(t, path)
			got := normalize(t, ours[name])

			theirs, err := os.ReadFile(filepath.Join(nc.dir, name+".ipynb"))
			require.NoError(t, err)
			want := normalize(t, theirs)
			require.Len(t, got, len(want), "cell count")
			for i := range want {
				require.Equal(t, want[i], got[i], "cell %d: nbclient (expected) vs kernelbox (actual)", i)
			}

			golden := filepath.Join(fixtures, "golden", name+".json")
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			require.NoError(t, enc.Encode(got))
			gb := buf.Bytes()
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
				require.NoError(t, os.WriteFile(golden, gb, 0o644))
			}
			wantGolden, err := os.ReadFile(golden)
			require.NoError(t, err, "run with -update to create the golden file")
			require.JSONEq(t, string(wantGolden), string(gb))
		})
	}
}

// TestEncodeRoundTrip checks that a notebook read and written back without running is
// byte for byte what nbformat wrote (the fixtures were written by nbformat), and that
// unknown metadata survives.
func TestEncodeRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in, err := os.ReadFile(filepath.Join(fixtures, name+".ipynb"))
			require.NoError(t, err)
			nb, err := notebook.Parse(in)
			require.NoError(t, err)
			out, err := nb.Encode()
			require.NoError(t, err)
			require.Equal(t, string(in), string(out))
		})
	}
	nb := readFixture(t, "empty")
	require.JSONEq(t, `{"nested": [1, {"z": true}], "s": "<&>"}`, string(nb.Metadata["custom"]))
	out, err := nb.Encode()
	require.NoError(t, err)
	require.True(t, bytes.Contains(out, []byte(`"s": "<&>"`)), "HTML characters are not escaped")
}
