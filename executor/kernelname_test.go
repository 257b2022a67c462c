package executor_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/workspace"
)

func TestCheckKernelName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"", true},
		{"ir", true},
		{"python3", true},
		{"kernelbox-python3", true},
		{"Julia-1.9_x.y", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{".", false},
		{"..", false},
		{"../ir", false},
		{"ir/../python3", false},
		{"/usr/share/jupyter/kernels/ir", false},
		{"i r", false},
		{"ir\x00", false},
		{"ír", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := executor.CheckKernelName(tc.name)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, executor.ErrKernelUnavailable)
		})
	}
}

// New refuses a kernel name that cannot be a kernelspec's.
func TestNewRefusesKernelName(t *testing.T) {
	t.Parallel()
	ws, err := workspace.New(workspace.Options{Root: t.TempDir()})
	require.NoError(t, err)
	defer ws.Close()
	_, err = executor.New(executor.Options{Workspace: ws, Kernel: "../ir"})
	require.ErrorIs(t, err, executor.ErrKernelUnavailable)
	require.Contains(t, err.Error(), `"../ir"`)
}
