package calls_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// TestLocalBackend runs calls on real Jupyter: the log holds every stream
// chunk of the call in order, its text is the Result's stdout; cancelling a
// running call interrupts the kernel, whose state survives.
func TestLocalBackend(t *testing.T) {
	te := testexec.Local(t, nil)
	r := newRegistry(t, te.Exec, calls.Options{})
	ctx := context.Background()

	t.Run("log is the output", func(t *testing.T) {
		c, err := r.Start(ctx, api.Request{SessionID: "loc", Code: "import time\nfor i in range(20):\n    print(i, flush=True)\n    time.sleep(0.02)"})
		require.NoError(t, err)
		evs, truncs := readAll(t, c, 0)
		require.Empty(t, truncs)
		checkSeqs(t, evs, 1)
		var out strings.Builder
		for _, ev := range evs {
			if ev.Type == "stream" {
				out.WriteString(ev.Text)
			}
		}
		res, err := c.Final()
		require.NoError(t, err)
		assert.Equal(t, api.StatusOK, res.Status)
		assert.Equal(t, res.Stdout, out.String())
		info := c.Info(true, false)
		assert.Equal(t, api.CallDone, info.State)
		assert.False(t, info.Started.IsZero())
		assert.False(t, info.Finished.Before(info.Started))
	})

	t.Run("cancel interrupts", func(t *testing.T) {
		_, err := te.Exec.Execute(ctx, api.Request{SessionID: "loc", Code: "kept = 41"})
		require.NoError(t, err)
		c, err := r.Start(ctx, api.Request{SessionID: "loc", Code: "import time\nprint('go', flush=True)\ntime.sleep(60)"})
		require.NoError(t, err)
		// Cancel once the code prints (an interrupt sent before the code starts
		// can be lost by the kernel, which is then restarted).
		var after int64
		for printed := false; !printed; {
			b, err := c.Read(ctx, after)
			require.NoError(t, err)
			after = b.Last(after)
			for _, ev := range b.Events {
				printed = printed || ev.Type == "stream"
			}
		}
		start := time.Now()
		require.NoError(t, c.Cancel())
		res, err := c.Wait(ctx)
		require.NoError(t, err)
		assert.Less(t, time.Since(start), 15*time.Second)
		assert.Equal(t, api.StatusTimeout, res.Status)
		assert.False(t, res.StateLost)
		require.NotNil(t, res.Error)
		assert.Contains(t, res.Error.Evalue, "canceled")
		assert.True(t, c.Info(false, false).Cancelled)
		next, err := te.Exec.Execute(ctx, api.Request{SessionID: "loc", Code: "kept + 1"})
		require.NoError(t, err)
		assert.Equal(t, "42", next.Result, "cancelled call: %+v", res.Error)
	})
}
