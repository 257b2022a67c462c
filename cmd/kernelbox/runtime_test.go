package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// TestRuntimeFlagRefusals: --runtime names a runtime the daemon must know (never a
// silent runc), and swarm refuses it with the reason (a service cannot choose
// its runtime).
func TestRuntimeFlagRefusals(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	_, err := openSwarm(context.Background(), &backendConfig{runtime: "runsc"}, log)
	if err == nil || !strings.Contains(err.Error(), "cannot choose its OCI runtime") || !strings.Contains(err.Error(), "default-runtime") {
		t.Errorf("swarm with --runtime: %v", err)
	}
	testenv.Docker(t)
	_, err = openDocker(context.Background(), &backendConfig{runtime: "no-such-runtime"}, log)
	if !errors.Is(err, docker.ErrNoRuntime) || !strings.Contains(err.Error(), "no-such-runtime") {
		t.Errorf("docker with an unknown --runtime: %v", err)
	}
}
