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
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// plantCode leaves behind, in a docker session, everything a restart in place would
// keep: an IPython startup file, a detached shell loop writing outputs/loop.txt, a
// file in /tmp; and a file in the session directory, which must stay.
const plantCode = `import os
startup = get_ipython().profile_dir.startup_dir
os.makedirs(startup, exist_ok=True)
open(os.path.join(startup, '00-planted.py'), 'w').write('kernelbox_planted = 1\n')
home_startup = os.path.expanduser('~/.ipython/profile_default/startup')
os.makedirs(home_startup, exist_ok=True)
open(os.path.join(home_startup, '00-planted.py'), 'w').write('kernelbox_planted = 1\n')
open('/tmp/x', 'w').write('left behind')
open('outputs/keep.txt', 'w').write('session file')
os.system("setsid sh -c 'while :; do date >> outputs/loop.txt; sleep 0.2; done' >/dev/null 2>&1 &")
print('planted')`

// inspectCode prints what survived: the startup file's variable, /tmp/x, the
// session file, and whether any shell runs in the container.
const inspectCode = `import os
comms = set()
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            comms.add(open('/proc/%s/comm' % p).read().strip())
        except OSError:
            pass
print('kernelbox_planted' in globals(), os.path.exists('/tmp/x'), os.path.exists('outputs/keep.txt'), 'sh' in comms)`

// TestDockerResetIsCleanSlate checks that a reset on docker gives a fresh container:
// no startup file, process or /tmp file of the old kernel survives, while the
// session's files do, and the reset is not reported as lost state.
func TestDockerResetIsCleanSlate(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newDockerEnv(t, testexec.Real{}, nil)
	r := e.run(t, "rs", plantCode)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "planted\n", r.Stdout)
	loop := filepath.Join(e.WS.Root(), "sessions", "rs", "outputs", "loop.txt")
	require.Eventually(t, func() bool { fi, err := os.Stat(loop); return err == nil && fi.Size() > 0 },
		10*time.Second, 100*time.Millisecond, "the shell loop writes outputs/loop.txt")

	t0 := time.Now()
	require.NoError(t, e.ResetSession(context.Background(), "rs"))
	t.Logf("reset (a new container) took %s", time.Since(t0).Round(time.Millisecond))

	r = e.run(t, "rs", inspectCode)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "False False True False", strings.TrimSpace(r.Stdout),
		"after reset: startup file ran, /tmp/x kept, session file kept, shell loop running")
	require.False(t, r.StateLost, "a reset is asked for, not lost state: %v", r.Notes)
	require.Equal(t, 1, r.ExecutionCount)

	before, err := os.Stat(loop)
	require.NoError(t, err)
	time.Sleep(time.Second)
	after, err := os.Stat(loop)
	require.NoError(t, err)
	require.Equal(t, before.Size(), after.Size(), "outputs/loop.txt still grows after the reset")
}

// TestDockerTimeoutRestartIsCleanSlate checks that the restart after a call that
// ignores its interrupt is a fresh container on docker too: the kernel's /tmp is gone,
// and the next call reports no further lost state.
func TestDockerTimeoutRestartIsCleanSlate(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	e := newDockerEnv(t, testexec.Real{}, func(o *executor.Options) { o.InterruptGrace = time.Second })
	e.run(t, "to", "open('/tmp/x', 'w').write('left behind')")
	r, err := e.Execute(context.Background(), api.Request{SessionID: "to", Timeout: 2 * time.Second,
		Code: "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.1)"})
	require.NoError(t, err)
	require.Equal(t, api.StatusTimeout, r.Status, "%+v", r.Error)
	require.True(t, r.StateLost)

	r = e.run(t, "to", "import os; os.path.exists('/tmp/x')")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "False", r.Result, "/tmp/x survived the restart after the timeout")
	require.False(t, r.StateLost, "the timeout already reported the lost state: %v", r.Notes)
}
