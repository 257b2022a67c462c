package jupyterapi_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyterapi"
)

// TestPreloadTemplate: a kernel of a template with a preload answers its
// client's requests, and the preload ran.
func TestPreloadTemplate(t *testing.T) {
	s := newGW(t, jupyterapi.Options{}, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "analyst", Preload: "preset = 7"}}
	})
	c := s.mustDial(s.start("analyst"))
	k := c.send("shell", "kernel_info_request", map[string]any{})
	rep, _ := c.until(k, "kernel_info_reply")
	assert.Contains(t, string(rep.Content), "language_info")
	x := c.execute("print(preset)")
	_, io := c.until(x, "execute_reply")
	assert.Equal(t, "7\n", stdout(io))
}
