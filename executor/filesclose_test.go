package executor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// TestFilesCutByClose (issue 33 item 7d): files work that the session's close
// cuts ends with api.ErrSessionClosed (session_closed), not context.Canceled,
// which says the caller went away (499); a caller that does go away still
// gets context.Canceled.
func TestFilesCutByClose(t *testing.T) {
	e, _ := newFakeEnv(t, nil, nil)
	op := executor.FileOp{Write: true, Create: true}
	for _, cut := range []string{"session closed", "caller gone"} {
		t.Run(cut, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			id := map[string]string{"session closed": "closed", "caller gone": "gone"}[cut]
			started := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- e.Files(ctx, id, op, func(ctx context.Context, _ executor.SessionFiles) error {
					close(started)
					<-ctx.Done() // an upload reading its body, cut
					return ctx.Err()
				})
			}()
			<-started
			if cut == "session closed" {
				require.NoError(t, e.CloseSession(context.Background(), id))
			} else {
				cancel()
			}
			err := <-done
			code, status := executor.ErrorCode(err)
			t.Logf("%s: %v -> %s (%d)", cut, err, code, status)
			if cut == "session closed" {
				require.ErrorIs(t, err, api.ErrSessionClosed)
				require.False(t, errors.Is(err, context.Canceled), "%v", err)
				require.Equal(t, 409, status)
			} else {
				require.ErrorIs(t, err, context.Canceled)
				require.False(t, errors.Is(err, api.ErrSessionClosed), "%v", err)
				require.Equal(t, 499, status)
			}
		})
	}
}
