package executor_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// newDillDockerEnv is newDockerEnv on a kernel image that has python3-dill (recipe
// 2 of kernel-image/build.sh): an image built before it fails the test with how to
// rebuild it.
func newDillDockerEnv(t *testing.T, mod func(*executor.Options)) *env {
	t.Helper()
	return newDillDockerEnvWith(t, testexec.Real{}, mod)
}

// newDillDockerEnvWith is newDillDockerEnv with settings r.
func newDillDockerEnvWith(t *testing.T, r testexec.Real, mod func(*executor.Options)) *env {
	t.Helper()
	e := newDockerEnv(t, r, mod)
	out, err := exec.Command("docker", "image", "inspect", "-f", `{{index .Config.Labels "io.kernelbox.recipe"}}`, testexec.DefaultImage).CombinedOutput()
	require.NoError(t, err, "%s", out)
	if r := strings.TrimSpace(string(out)); r == "1" || r == "" {
		t.Fatalf("%s is of recipe %q, without python3-dill: rebuild it with `kernelbox image build` (it rebuilds an image of an older recipe)", testexec.DefaultImage, r)
	}
	return e
}

func TestDockerHibernateResume(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	hibernateResume(t, newDillDockerEnv(t, nil), "dhib")
}

func TestDockerHibernateDamagedSnapshot(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	damagedSnapshot(t, newDillDockerEnv(t, nil), "ddmg")
}

// The hostile object's marker names the pid the kernel has in its container's pid
// namespace: the host's test process is not that process.
func TestDockerHibernateHostileObject(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	hostileReduce(t, newDillDockerEnv(t, nil), "devil")
}

func TestDockerHibernateEdges(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	hibernateEdges(t, newDillDockerEnv(t, nil), "dedge")
}

func TestDockerIdleHibernates(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	idleHibernates(t, newDillDockerEnv(t, func(o *executor.Options) { o.HibernateAfter = 2 * time.Second }), "didle")
}

func TestDockerForkDiverges(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	forkDiverges(t, newDillDockerEnv(t, nil), "dfk")
}

func TestDockerHibernateTimes(t *testing.T) {
	t.Parallel() // which real-kernel tests may be parallel: main_test.go
	hibernateTimes(t, newDillDockerEnv(t, nil), "dtime")
}

// hibernateTimes measures hibernate and resume of 10 MB and 100 MB of float64s
// and logs them; the bounds are generous (the numbers go in the README).
func hibernateTimes(t *testing.T, e *env, id string) {
	ctx := context.Background()
	for _, mb := range []int{10, 100} {
		sid := fmt.Sprintf("%s%d", id, mb)
		r := e.run(t, sid, fmt.Sprintf("import numpy as np; a = np.random.default_rng(0).random(%d * 2**20 // 8)", mb))
		require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
		t0 := time.Now()
		info, err := e.Hibernate(ctx, sid)
		require.NoError(t, err)
		hib := time.Since(t0)
		t0 = time.Now()
		res, err := e.Resume(ctx, sid)
		require.NoError(t, err)
		require.NotNil(t, res.StateRestored)
		resume := time.Since(t0)
		t.Logf("%d MB: hibernate %s (snapshot %d bytes written in %d ms in the kernel), resume %s (restore %d ms in the kernel)",
			mb, hib.Round(time.Millisecond), info.Snapshot.Bytes, info.Snapshot.TookMS, resume.Round(time.Millisecond), res.StateRestored.TookMS)
		require.Less(t, hib, 2*time.Minute)
		require.Less(t, resume, 2*time.Minute)
		require.Equal(t, fmt.Sprint(mb*(1<<20)/8), e.run(t, sid, "len(a)").Result)
	}
}
