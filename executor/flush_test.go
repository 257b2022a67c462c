package executor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
)

// kernelbox's kernel launcher makes a flush with nothing new to send return at once
// (serverflags' kernelLauncher). Output a cell wrote must still come back with that
// cell when ipykernel's IO thread flushed it on its own timer (0.2 s after the first
// write) just before the cell ended: the cell's own flushes are then skipped, and the
// write must already be queued ahead of "idle". The cells end around that moment,
// on both streams, with and without a newline; the calls after them get nothing
// that is not theirs. (The IO thread caught inside that flush is the next test.)
func TestLocalOutputAtTimedFlushKeptWithItsCell(t *testing.T) {
	e := newEnv(t, nil)
	e.run(t, "f", "import sys, time")
	k := 0
	for ms := 180; ms <= 225; ms += 3 {
		for _, stream := range []string{"stdout", "stderr"} {
			k++
			text := fmt.Sprintf("cell %d at %d ms", k, ms)
			code := fmt.Sprintf("sys.%s.write(%q)\nif %d %% 2: sys.%s.write('\\n')\ntime.sleep(%g)", stream, text, k, stream, float64(ms)/1000)
			r := e.run(t, "f", code)
			require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
			want := text
			if k%2 == 1 {
				want += "\n"
			}
			got := r.Stdout
			if stream == "stderr" {
				got = r.Stderr
				require.Empty(t, r.Stdout, "cell %d", k)
			} else {
				require.Empty(t, r.Stderr, "cell %d", k)
			}
			require.Equal(t, want, got, "cell %d: its output, whole, with it", k)
			require.Empty(t, r.Notes, "cell %d: nothing stray", k)
		}
	}
	r := e.run(t, "f", "1")
	require.Equal(t, "1", r.Result)
	require.Empty(t, r.Stdout+r.Stderr)
	require.Empty(t, r.Notes)
}

// The same moment, made certain: the IO thread is held inside its flush, after it
// took the buffer and before it queued the stream message (the session's send made
// slow on that thread), while the cell ends. The cell's last flush must not be
// skipped then: its output would be queued behind "idle" and lost to the call.
func TestLocalOutputInIOThreadsFlushKeptWithItsCell(t *testing.T) {
	e := newEnv(t, nil)
	e.run(t, "f", `import sys, time, threading
_send = sys.stdout.session.send
def _slow(*a, **k):
    if threading.current_thread() is sys.stdout.pub_thread.thread:
        time.sleep(0.1)
    return _send(*a, **k)
sys.stdout.session.send = _slow`)
	for k := 1; k <= 5; k++ {
		text := fmt.Sprintf("held %d\n", k)
		r := e.run(t, "f", fmt.Sprintf("sys.stdout.write(%q)\nsys.stdout.pub_thread.schedule(sys.stdout._flush)\ntime.sleep(0.03)", text))
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		require.Equal(t, text, r.Stdout, "call %d: its output, with it", k)
		require.Empty(t, r.Notes, "call %d: nothing stray", k)
	}
}
