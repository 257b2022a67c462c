package executor_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// A preload that allocates past its template's memory limit fails the start with
// an error naming the OOM kill and the limit (before: "kernel died"), and its
// container is removed.
func TestDockerPreloadOOM(t *testing.T) {
	ts := loadTemplates(t, `{"templates": [{"name": "small", "memory": "256m", "preload": [
	  "b = bytearray(400 << 20)",
	  "b[::4096] = b'x' * len(b[::4096])"
	]}]}`, dockerCaps)
	e := newDockerEnv(t, testexec.Real{Memory: 1 << 30}, func(o *executor.Options) {
		o.Templates = ts
		o.StartTimeout = 3 * time.Minute
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, err := e.Execute(ctx, api.Request{SessionID: "oom", Template: "small", Code: "len(b)", Timeout: 5 * time.Second})
	require.ErrorIs(t, err, api.ErrBackend)
	msg := err.Error()
	t.Logf("the start error: %s", msg)
	require.Contains(t, msg, `template "small": the kernel died while it ran the preload: kernel was OOM-killed at the template's memory limit (256 MiB)`)
	require.Eventually(t, func() bool { return len(dockerContainers(t)) == 0 }, time.Minute, 100*time.Millisecond,
		"the OOM-killed preload's container is removed")
}

// ourContainers returns "name session-label" of this test process's running
// kernelbox containers.
func ourContainers(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "--filter", "label=io.kernelbox.created-by=kernelbox",
		"--format", `{{.Names}} {{.Label "`+testexec.LabelSession+`"}} {{.Label "`+testexec.LabelOwner+`"}}`).Output()
	require.NoError(t, err)
	var mine []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && strings.HasPrefix(f[2], strconv.Itoa(os.Getpid())+":") {
			mine = append(mine, f[0]+" "+f[1])
		}
	}
	return mine
}

// `docker ps` tells which session each container serves: a session's container is
// named after it, a warm pool's after its template, and a warm container taken by a
// session is renamed after that session (its session label, which Docker cannot
// change, stays the pool's placeholder). Before, every container was
// kernelbox-<random> and a taken warm one kept its ".warm-…" label alone.
func TestDockerContainerNamesFollowSessions(t *testing.T) {
	ts := loadTemplates(t, `{"templates": [{"name": "pooled", "warm": 1}]}`, dockerCaps)
	e := newDockerEnv(t, testexec.Real{Memory: 1 << 30}, func(o *executor.Options) {
		o.Templates = ts
		o.StartTimeout = 3 * time.Minute
	})
	warmName := regexp.MustCompile(`^kernelbox-warm\.pooled-[0-9a-f]{8} \.warm-[0-9a-f]+$`)
	require.Eventually(t, func() bool { return e.WarmReadyOf("pooled") == 1 }, 3*time.Minute, 50*time.Millisecond)
	cs := ourContainers(t)
	require.Len(t, cs, 1)
	require.Regexp(t, warmName, cs[0])

	ctx := context.Background()
	r, err := e.Execute(ctx, api.Request{SessionID: "taker", Template: "pooled", Code: "import os; os.getcwd()"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	r = e.run(t, "cold", "1 + 1")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	// The pool refills: a new warm container beside the two sessions'.
	require.Eventually(t, func() bool { return e.WarmReadyOf("pooled") == 1 }, 3*time.Minute, 50*time.Millisecond)

	var taker, cold, warm []string
	for _, c := range ourContainers(t) {
		switch {
		case regexp.MustCompile(`^kernelbox-taker-[0-9a-f]{8} \.warm-[0-9a-f]+$`).MatchString(c):
			taker = append(taker, c)
		case regexp.MustCompile(`^kernelbox-cold-[0-9a-f]{8} cold$`).MatchString(c):
			cold = append(cold, c)
		case warmName.MatchString(c):
			warm = append(warm, c)
		default:
			t.Errorf("container %q is named after no session", c)
		}
	}
	require.Len(t, taker, 1, "the taken warm container, renamed after its session")
	require.Len(t, cold, 1, "the cold session's container")
	require.Len(t, warm, 1, "the pool's new member")
	require.NotEqual(t, strings.Fields(cs[0])[1], strings.Fields(warm[0])[1])
	require.Equal(t, strings.Fields(cs[0])[1], strings.Fields(taker[0])[1], "the taken container is the one that was warm")

	// The operator's query from the README finds a session's container by name.
	out, err := exec.Command("docker", "ps", "-q", "--filter", "name=^kernelbox-taker-[0-9a-f]{8}$").Output()
	require.NoError(t, err)
	require.Len(t, strings.Fields(string(out)), 1)
}
