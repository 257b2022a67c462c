package executor_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/workspace"
)

// env is an executor on the local backend (or another) with its own workspace and a
// policy whose workdir is Data (a temp dir the test can put input files in).
type env struct {
	*executor.Executor
	Backend *testexec.Marked // a local backend of the test's own (newOwnEnv); nil otherwise
	WS      *workspace.Manager
	Data    string
	Home    string
}

// newEnv builds an env on the local backend on one of the test binary's shared
// Jupyter Servers (testexec.SharedLocal): for tests that neither count processes,
// goroutines or kernels, nor kill, stop or freeze the server. Those take newOwnEnv.
func newEnv(t testing.TB, mod func(*executor.Options)) *env {
	t.Helper()
	return newEnvOn(t, testexec.SharedLocal(t), mod)
}

// newOwnEnv builds an env on a local backend with a Jupyter Server of its own
// (Backend set): for tests that count its processes or kernels, kill or stop its
// server, or count goroutines.
func newOwnEnv(t testing.TB, mod func(*executor.Options)) *env {
	t.Helper()
	return newLocalEnv(t, testexec.LocalWith(t, testexec.Real{}), mod)
}

// newLocalEnv builds an env on local backend b; the executor closes b.
func newLocalEnv(t testing.TB, b *testexec.Marked, mod func(*executor.Options)) *env {
	t.Helper()
	te := testexec.On(t, b.Backend, mod)
	return &env{Executor: te.Exec, Backend: b, WS: te.WS, Data: te.Data, Home: te.Home}
}

// newEnvOn builds an env on any backend; the executor closes the backend.
func newEnvOn(t testing.TB, b executor.Backend, mod func(*executor.Options)) *env {
	t.Helper()
	te := testexec.On(t, b, mod)
	return &env{Executor: te.Exec, WS: te.WS, Data: te.Data, Home: te.Home}
}

func (e *env) run(t testing.TB, session, code string) *api.Result {
	t.Helper()
	r, err := e.Execute(context.Background(), api.Request{SessionID: session, Code: code})
	require.NoError(t, err)
	return r
}

// jupyterPID returns the pid of the local backend's Jupyter Server itself: ServerPID
// is its supervisor's, which only waits and kills; stopping that one freezes nothing.
func (e *env) jupyterPID(t testing.TB) int {
	t.Helper()
	sup := e.Backend.ServerPID()
	require.NotZero(t, sup)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", sup, sup))
	require.NoError(t, err)
	kids := strings.Fields(string(b))
	require.Len(t, kids, 1, "the supervisor has one child, the server")
	pid, err := strconv.Atoi(kids[0])
	require.NoError(t, err)
	return pid
}
