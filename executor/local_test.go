package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
)

func TestLocalStatePersists(t *testing.T) {
	e := newEnv(t, nil)
	r := e.run(t, "s1", "x = 41")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.False(t, r.StateLost)
	r = e.run(t, "s1", "x + 1")
	require.Equal(t, api.StatusOK, r.Status)
	require.Equal(t, "42", r.Result)
	require.Equal(t, 2, r.ExecutionCount)

	r = e.run(t, "s1", "1/0")
	require.Equal(t, api.StatusError, r.Status)
	require.Equal(t, "ZeroDivisionError", r.Error.Ename)
	require.NotEmpty(t, r.Error.Traceback)
	for _, l := range r.Error.Traceback {
		require.NotContains(t, l, "\x1b[")
	}

	r = e.run(t, "s1", "import sys\nprint('out')\nprint('err', file=sys.stderr)\nprint('more')")
	require.Equal(t, "out\nmore\n", r.Stdout)
	require.Equal(t, "err\n", r.Stderr)

	// Another session does not see x.
	r = e.run(t, "s2", "x")
	require.Equal(t, api.StatusError, r.Status)
	require.Equal(t, "NameError", r.Error.Ename)
}

func TestLocalInputsAndArtifacts(t *testing.T) {
	e := newEnv(t, nil)
	csv := filepath.Join(e.Data, "bench.csv")
	require.NoError(t, os.WriteFile(csv, []byte("a,b\n1,2\n3,4\n"), 0o644))
	r, err := e.Execute(context.Background(), api.Request{
		SessionID: "art",
		Code:      "import pandas as pd\ndf = pd.read_csv('inputs/bench.csv')\nopen('outputs/a.txt','w').write(str(df.b.sum()))\ndf.b.sum()",
		Inputs:    []string{csv},
	})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "6", r.Result)
	require.Len(t, r.Artifacts, 1)
	require.Equal(t, "a.txt", r.Artifacts[0].Name)
	b, err := os.ReadFile(r.Artifacts[0].Path)
	require.NoError(t, err)
	require.Equal(t, "6", string(b))
	require.True(t, strings.HasPrefix(r.Artifacts[0].Path, filepath.Join(e.WS.ArtifactsDir(), "art")+"/"))

	// Not reported again when untouched.
	r = e.run(t, "art", "1")
	require.Empty(t, r.Artifacts)

	// A plot lands as an artifact file.
	r = e.run(t, "art", "import matplotlib.pyplot as plt\nplt.plot([1,2,3])\nplt.show()")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	var png bool
	for _, a := range r.Artifacts {
		png = png || a.MIME == "image/png"
	}
	require.True(t, png, "%+v", r.Artifacts)
}

func TestLocalDenied(t *testing.T) {
	e := newEnv(t, nil)
	secret := filepath.Join(e.Home, ".ssh", "id_rsa")
	require.NoError(t, os.WriteFile(secret, []byte("KEY"), 0o600))
	link := filepath.Join(e.Data, "innocent.csv")
	require.NoError(t, os.Symlink(secret, link))
	for _, in := range []string{secret, link, "/etc/shadow"} {
		r, err := e.Execute(context.Background(), api.Request{SessionID: "d", Code: "1", Inputs: []string{in}})
		require.ErrorIs(t, err, api.ErrDenied)
		require.Equal(t, api.StatusDenied, r.Status)
		require.Contains(t, r.Error.Evalue, "rule")
	}
	require.Empty(t, e.Sessions(), "a denied call creates no session")
}

func TestLocalBadRequests(t *testing.T) {
	e := newEnv(t, nil)
	for name, req := range map[string]api.Request{
		"empty id":   {SessionID: "", Code: "1"},
		"bad id":     {SessionID: "../x", Code: "1"},
		"long id":    {SessionID: strings.Repeat("a", 65), Code: "1"},
		"empty code": {SessionID: "a", Code: "  \n"},
		"huge code":  {SessionID: "a", Code: strings.Repeat("#", 1<<20+1)},
		"nul code":   {SessionID: "a", Code: "1\x00"},
		"missing":    {SessionID: "a", Code: "1", Inputs: []string{"/nonexistent/file.csv"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.Execute(context.Background(), req)
			require.Error(t, err)
		})
	}
}

func TestLocalTimeoutKeepsState(t *testing.T) {
	e := newEnv(t, nil)
	e.run(t, "t", "x = 7")
	for _, code := range []string{"while True: pass", "import time\ntime.sleep(600)"} {
		start := time.Now()
		r, err := e.Execute(context.Background(), api.Request{SessionID: "t", Code: code, Timeout: 2 * time.Second})
		require.NoError(t, err)
		require.Equal(t, api.StatusTimeout, r.Status)
		require.False(t, r.StateLost)
		require.Less(t, time.Since(start), 5*time.Second)
		r = e.run(t, "t", "x")
		require.Equal(t, "7", r.Result)
	}
}

func TestLocalTimeoutIgnoringSIGINT(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newEnv(t, nil)
	e.run(t, "t", "x = 7")
	r, err := e.Execute(context.Background(), api.Request{SessionID: "t", Timeout: time.Second,
		Code: "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(600)"})
	require.NoError(t, err)
	require.Equal(t, api.StatusTimeout, r.Status)
	require.True(t, r.StateLost)
	r = e.run(t, "t", "'x' in dir()")
	require.Equal(t, api.StatusOK, r.Status)
	require.Equal(t, "False", r.Result)
}

func TestLocalKernelDeath(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newEnv(t, nil)
	for _, code := range []string{"import os; os._exit(1)", "import os; os.kill(os.getpid(), 9)"} {
		e.run(t, "k", "x = 1")
		r := e.run(t, "k", code)
		require.Equal(t, api.StatusKernelDied, r.Status, "%+v", r.Error)
		require.True(t, r.StateLost)
		r = e.run(t, "k", "'x' in dir()")
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		require.Equal(t, "False", r.Result)
		require.True(t, r.StateLost)
	}
}

// TestLocalRestageInput: an input sent again unchanged is not copied again (the
// notes say so), and one the kernel changed is copied again.
func TestLocalRestageInput(t *testing.T) {
	e := newEnv(t, nil)
	csv := filepath.Join(e.Data, "bench.csv")
	require.NoError(t, os.WriteFile(csv, []byte("a,b\n1,2\n"), 0o644))
	time.Sleep(1100 * time.Millisecond) // a file changed within a second is always copied
	call := func(code string) *api.Result {
		r, err := e.Execute(context.Background(), api.Request{SessionID: "re", Code: code, Inputs: []string{csv}})
		require.NoError(t, err)
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		return r
	}
	read := "open('inputs/bench.csv').read()"
	notCopied := "not copied again"
	r := call(read)
	require.Equal(t, `'a,b\n1,2\n'`, r.Result)
	require.NotContains(t, strings.Join(r.Notes, "\n"), notCopied)
	r = call(read)
	require.Equal(t, `'a,b\n1,2\n'`, r.Result)
	require.Contains(t, strings.Join(r.Notes, "\n"), notCopied)
	e.run(t, "re", "open('inputs/bench.csv', 'w').write('a,b\\n9,9\\n')")
	r = call(read)
	require.Equal(t, `'a,b\n1,2\n'`, r.Result, "the kernel's change is undone by staging again")
	require.NotContains(t, strings.Join(r.Notes, "\n"), notCopied)
}
