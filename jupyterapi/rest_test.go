package jupyterapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyterapi"
)

// TestREST drives the REST routes against a real local-backend executor: the
// templates as kernelspecs, a start that is a kernelbox session with a UUID
// id, the start requests refused (unknown kernelspec, env, path, bad JSON) with
// nothing left behind, and kernel ids that are not the gateway's.
func TestREST(t *testing.T) {
	s := newGW(t, jupyterapi.Options{}, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "small", Description: "a second template"}}
	})

	st, b := s.do("GET", "/api", "")
	require.Equal(t, http.StatusOK, st)
	assert.Contains(t, string(b), `"version"`)

	st, b = s.do("GET", "/api/kernelspecs", "")
	require.Equal(t, http.StatusOK, st, string(b))
	var specs jupyterapi.KernelSpecs
	require.NoError(t, json.Unmarshal(b, &specs))
	assert.Equal(t, "default", specs.Default)
	require.Contains(t, specs.KernelSpecs, "small")
	assert.Equal(t, "python", specs.KernelSpecs["small"].Spec.Language)
	assert.Contains(t, specs.KernelSpecs["small"].Spec.DisplayName, "a second template")
	st, _ = s.do("GET", "/api/kernelspecs/small", "")
	assert.Equal(t, http.StatusOK, st)
	st, _ = s.do("GET", "/api/kernelspecs/nope", "")
	assert.Equal(t, http.StatusNotFound, st)

	before := len(s.e.Sessions())
	for _, tc := range []struct{ name, body, want string }{
		{"unknown kernelspec", `{"name":"nope"}`, "unknown template"},
		{"path", `{"name":"default","path":"/etc"}`, "working directory"},
		{"malformed", `{"name":`, "start request"},
		{"env not strings", `{"env":{"KERNEL_X":1}}`, "start request"},
		{"env too big", `{"env":{` + manyVars(1025) + `}}`, "at most 1024"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, b := s.do("POST", "/api/kernels", tc.body)
			assert.Equal(t, http.StatusBadRequest, st, string(b))
			assert.Contains(t, string(b), tc.want)
		})
	}
	assert.Len(t, s.e.Sessions(), before, "a refused start leaves no session")

	// env is accepted and ignored: none of it reaches the kernel.
	st, b = s.do("POST", "/api/kernels", `{"name":"default","env":{"KERNEL_WORKING_DIR":"/home/x","LD_PRELOAD":"/tmp/gw-evil.so","PYTHONPATH":"/tmp/gw-evil","GW_SECRET":"s3cret"}}`)
	require.Equal(t, http.StatusCreated, st, string(b))
	var envKernel jupyterapi.Kernel
	require.NoError(t, json.Unmarshal(b, &envKernel))
	res, err := s.e.Execute(context.Background(), api.Request{SessionID: envKernel.ID,
		Code: "import os\nprint(sorted(k for k, v in os.environ.items() if 'gw-evil' in v or k in ('GW_SECRET', 'KERNEL_WORKING_DIR')))"})
	require.NoError(t, err)
	assert.Equal(t, "[]\n", res.Stdout, "a start request's env reached the kernel")
	st, _ = s.do("DELETE", "/api/kernels/"+envKernel.ID, "")
	require.Equal(t, http.StatusNoContent, st)

	id := s.start("small")
	_, err = uuid.Parse(id)
	require.NoError(t, err, "kernel ids are UUIDs")
	assert.True(t, api.ValidSessionID(id), "a UUID passes the session id rule")
	info, err := s.e.Session(id)
	require.NoError(t, err, "the kernel is a kernelbox session")
	assert.Equal(t, "small", info.Template)
	assert.NotEmpty(t, info.KernelID, "its kernel is started")

	st, b = s.do("GET", "/v1/sessions", "")
	require.Equal(t, http.StatusOK, st)
	assert.Contains(t, string(b), id)
	st, b = s.do("GET", "/api/kernels", "")
	require.Equal(t, http.StatusOK, st)
	var list []jupyterapi.Kernel
	require.NoError(t, json.Unmarshal(b, &list))
	require.Len(t, list, 1)
	assert.Equal(t, id, list[0].ID)
	assert.Equal(t, "idle", list[0].ExecutionState)
	assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`, list[0].LastActivity, "the form Jupyter Server parses")

	// A session of /v1 is listed and can be opened, but only to watch: it cannot be
	// shut down, interrupted or restarted from here (TestWatchAgent watches one).
	_, err = s.e.CreateSession(context.Background(), "agent-1", "")
	require.NoError(t, err)
	st, b = s.do("GET", "/api/kernels/agent-1", "")
	assert.Equal(t, http.StatusOK, st, string(b))
	st, b = s.do("GET", "/api/kernels", "")
	require.Equal(t, http.StatusOK, st)
	assert.Contains(t, string(b), `"agent-1"`)
	for _, path := range []string{"/api/kernels/" + uuid.NewString(), "/api/kernels/not%20an%20id"} {
		st, b = s.do("GET", path, "")
		assert.Equal(t, http.StatusNotFound, st, path+": "+string(b))
	}
	for _, r := range [][2]string{{"DELETE", ""}, {"POST", "/interrupt"}, {"POST", "/restart"}} {
		st, b = s.do(r[0], "/api/kernels/agent-1"+r[1], map[bool]string{true: "{}"}[r[0] == "POST"])
		assert.Equal(t, http.StatusForbidden, st, r[0]+r[1])
		assert.Contains(t, string(b), "belongs to an agent")
	}
	_, err = s.e.Session("agent-1")
	assert.NoError(t, err, "the agent's session is untouched")

	st, _ = s.do("POST", "/api/kernels/"+id+"/interrupt", "{}")
	assert.Equal(t, http.StatusNoContent, st)
	st, b = s.do("POST", "/api/kernels/"+id+"/restart", "{}")
	assert.Equal(t, http.StatusOK, st, string(b))
	st, _ = s.do("DELETE", "/api/kernels/"+id, "")
	assert.Equal(t, http.StatusNoContent, st)
	// A closed session's kernel id.
	for _, r := range [][2]string{{"GET", ""}, {"DELETE", ""}, {"POST", "/interrupt"}, {"POST", "/restart"}} {
		st, b = s.do(r[0], "/api/kernels/"+id+r[1], map[bool]string{true: "{}"}[r[0] == "POST"])
		assert.Equal(t, http.StatusNotFound, st, r[0]+r[1]+": "+string(b))
	}
	_, err = s.e.Session(id)
	assert.Error(t, err, "the session is closed")
	c, resp, err := s.dial(id, nil)
	assert.Nil(t, c)
	require.Error(t, err)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// manyVars is n env entries as JSON members.
func manyVars(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"KERNEL_%d":"x"`, i)
	}
	return strings.Join(parts, ",")
}
