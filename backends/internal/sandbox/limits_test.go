package sandbox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
	"github.com/kernelbox/kernelbox/executor"
)

// Settings.Limits is what a server shows and caps templates with, for docker and
// swarm alike: each zero value its default, a negative limit off (0), a given one
// as given.
func TestSettingsLimits(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		in   sandbox.Settings
		want executor.Limits
	}{
		"defaults": {sandbox.Settings{}, executor.Limits{
			Kernel: "python3", Image: sandbox.DefaultImage, Memory: sandbox.DefaultMemory, CPUs: sandbox.DefaultCPUs,
			Pids: sandbox.DefaultPidsLimit, MaxLifetime: sandbox.DefaultMaxLifetime,
		}},
		"off": {sandbox.Settings{Memory: -1, CPUs: -1, PidsLimit: -1}, executor.Limits{
			Kernel: "python3", Image: sandbox.DefaultImage, MaxLifetime: sandbox.DefaultMaxLifetime,
		}},
		"given": {sandbox.Settings{Image: "k:1", Memory: 512 << 20, CPUs: 0.5, PidsLimit: 64, MaxLifetime: time.Hour}, executor.Limits{
			Kernel: "python3", Image: "k:1", Memory: 512 << 20, CPUs: 0.5, Pids: 64, MaxLifetime: time.Hour,
		}},
	} {
		require.Equal(t, c.want, c.in.Limits(), name)
	}
}
