package undo

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUndo(t *testing.T) {
	t.Parallel()
	errA, errC := errors.New("a failed"), errors.New("c failed")
	tests := []struct {
		name    string
		fail    map[string]error
		wantErr []error
	}{
		{"all succeed", nil, nil},
		{"failures are joined and do not stop later steps", map[string]error{"a": errA, "c": errC}, []error{errA, errC}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var u List
			var ran []string
			for _, name := range []string{"a", "b", "c"} {
				u.Add("step "+name, func(ctx context.Context) error {
					_, hasDeadline := ctx.Deadline()
					assert.True(t, hasDeadline, "a cleanup step runs under a bounded context")
					assert.NoError(t, ctx.Err())
					ran = append(ran, name)
					return tt.fail[name]
				})
			}
			err := u.Run(time.Minute)
			assert.Equal(t, []string{"c", "b", "a"}, ran, "steps run last first")
			if tt.wantErr == nil {
				require.NoError(t, err)
			} else {
				for _, want := range tt.wantErr {
					require.ErrorIs(t, err, want)
				}
				assert.Contains(t, err.Error(), "step a: a failed")
			}
			ran = nil
			require.NoError(t, u.Run(time.Minute), "run forgets the steps it ran")
			assert.Empty(t, ran)
		})
	}
}
