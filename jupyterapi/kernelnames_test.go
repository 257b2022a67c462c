package jupyterapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyterapi"
)

// TestKernelNames starts kernels by the Jupyter kernel names notebooks written
// elsewhere carry: "python3" and "python" choose the default template, a name in a
// template's kernel_names that template, and each is listed as a kernelspec, so a
// notebook opens without a "kernel not found" dialog and keeps its kernelspec.
func TestKernelNames(t *testing.T) {
	s := newGW(t, jupyterapi.Options{}, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "analyst", Description: "pandas", KernelNames: []string{"conda-env-analysis-py"}}}
	})

	st, b := s.do("GET", "/api/kernelspecs", "")
	require.Equal(t, http.StatusOK, st, string(b))
	var specs jupyterapi.KernelSpecs
	require.NoError(t, json.Unmarshal(b, &specs))
	for _, name := range []string{"default", "analyst", "python3", "python", "conda-env-analysis-py"} {
		require.Contains(t, specs.KernelSpecs, name)
		assert.Equal(t, name, specs.KernelSpecs[name].Name)
		assert.Equal(t, "python", specs.KernelSpecs[name].Spec.Language)
	}
	assert.NotContains(t, specs.KernelSpecs, "ir", "no template runs R")
	assert.Contains(t, specs.KernelSpecs["python3"].Spec.DisplayName, "(as python3)")
	st, _ = s.do("GET", "/api/kernelspecs/python3", "")
	assert.Equal(t, http.StatusOK, st)
	st, b = s.do("POST", "/api/kernels", `{"name":"ir"}`)
	assert.Equal(t, http.StatusBadRequest, st, "no template runs R: %s", b)

	for name, tmpl := range map[string]string{"python3": "default", "python": "default", "conda-env-analysis-py": "analyst"} {
		t.Run(name, func(t *testing.T) {
			st, b := s.do("POST", "/api/kernels", `{"name":"`+name+`"}`)
			require.Equal(t, http.StatusCreated, st, string(b))
			var k jupyterapi.Kernel
			require.NoError(t, json.Unmarshal(b, &k))
			assert.Equal(t, name, k.Name, "the kernel keeps the kernelspec it was asked for")
			info, err := s.e.Session(k.ID)
			require.NoError(t, err)
			assert.Equal(t, tmpl, info.Template)
			st, b = s.do("GET", "/api/kernels/"+k.ID, "")
			require.Equal(t, http.StatusOK, st)
			assert.Contains(t, string(b), `"name":"`+name+`"`)
			st, _ = s.do("DELETE", "/api/kernels/"+k.ID, "")
			assert.Equal(t, http.StatusNoContent, st)
		})
	}
}
