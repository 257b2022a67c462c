package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/permissions"
)

// TestFilesDeniedByPolicy: with a policy that denies files.write, an upload
// (alone or in a batch) and a delete are 403 permission_denied and write
// nothing: the session is not created, and the kernel of a session made by
// execute sees no file; downloads (files.read) still work.
func TestFilesDeniedByPolicy(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	srv := callServer(t, func(o *executor.Options) {
		p := *o.Permissions
		p.Policy = permissions.NewPolicy(append(permissions.DefaultRules(),
			permissions.Rule{Effect: permissions.Deny, Capability: permissions.FilesWrite, Reason: "uploads are off", Source: "test"})...)
		o.Permissions = &p
	}, calls.Options{})

	resp, b := raw(t, srv, http.MethodPut, "/v1/sessions/pd/files/inputs/x.csv", strings.NewReader("a,b\n1,2\n"))
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", b)
	assert.Equal(t, api.CodeDenied, errCode(t, b))
	assert.Contains(t, string(b), "uploads are off")
	resp, b = raw(t, srv, http.MethodGet, "/v1/sessions/pd/files?path=", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the denied upload created no session: %s", b)

	batch, err := json.Marshal(api.FileBatch{Uploads: []api.FileUpload{{Path: "inputs/y.txt", Content: []byte("y")}}})
	require.NoError(t, err)
	resp, b = raw(t, srv, http.MethodPost, "/v1/sessions/pd/files:batch", bytes.NewReader(batch), "Content-Type", "application/json")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", b)
	assert.Equal(t, api.CodeDenied, errCode(t, b))

	run(t, srv, "pd", `open("kept.txt", "w").write("kept")`)
	resp, b = raw(t, srv, http.MethodPut, "/v1/sessions/pd/files/kept.txt", strings.NewReader("overwritten"))
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", b)
	resp, b = raw(t, srv, http.MethodDelete, "/v1/sessions/pd/files/kept.txt", nil)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", b)
	assert.Equal(t, api.CodeDenied, errCode(t, b))
	out := run(t, srv, "pd", `import os
print(sorted(n for d, _, fs in os.walk(".") for n in fs), open("kept.txt").read())`)
	assert.Equal(t, "['kept.txt'] kept", strings.TrimSpace(out), "nothing was written, nothing deleted")

	resp, b = raw(t, srv, http.MethodGet, "/v1/sessions/pd/files/kept.txt", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "files.read is still allowed: %s", b)
	assert.Equal(t, "kept", string(b))
}
