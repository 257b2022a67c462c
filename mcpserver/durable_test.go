package mcpserver_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/mcpserver"
)

// TestForkSessionTool: fork_session copies a session's variables into a new one,
// and an answer after a hibernation says the state was restored.
func TestForkSessionTool(t *testing.T) {
	testenv.Imports(t, testenv.Jupyter(t), "dill")
	e := newEnv(t)
	cs := e.client(t, mcpserver.Options{})
	res := call(t, cs, "execute_code", map[string]any{"session_id": "m1", "code": "x = 41\ng = (i for i in range(3))"})
	require.False(t, res.IsError, textOf(res))

	res = call(t, cs, "fork_session", map[string]any{"session_id": "m1", "new_session_id": "m2"})
	require.False(t, res.IsError, textOf(res))
	require.Contains(t, textOf(res), `Session "m2" is a copy of "m1"`)
	require.Contains(t, textOf(res), "Not copied")
	require.Contains(t, textOf(res), "g: ")
	res = call(t, cs, "execute_code", map[string]any{"session_id": "m2", "code": "x + 1"})
	require.Contains(t, textOf(res), "result:\n42")

	res = call(t, cs, "fork_session", map[string]any{"session_id": "nope", "new_session_id": "m3"})
	require.True(t, res.IsError)
	require.Contains(t, textOf(res), "no live session")

	_, err := e.E.Hibernate(context.Background(), "m1")
	require.NoError(t, err)
	res = call(t, cs, "execute_code", map[string]any{"session_id": "m1", "code": "x"})
	require.False(t, res.IsError, textOf(res))
	require.Contains(t, textOf(res), "state_restored: the session's variables were restored from hibernation")
	require.Contains(t, textOf(res), "1 not restored")
}
