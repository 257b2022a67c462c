package swarm_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	kbclient "github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// TestBesideDocker measures the swarm backend beside the docker backend in the
// same run, both through `kernelbox serve` and the Go client on a unix socket:
// the first result of a session started alone (p50/p99 of several, one after
// another), a trivial cell on a warm session (p50), and a burst of sessions
// started at once (the swarm's is TestSessionsSpread's; the docker one runs
// the same workload here, on the host's daemon). Both share this machine's two
// cores: the lab's three nodes and the host's daemon are on the same CPUs.
//
// It is a measurement, not a check (it asserts only that every cell answered), and
// it took 93 s of every make test: it runs only with KERNELBOX_SWARM_COMPARE=1,
// which `make bench-swarm` sets (docs/benchmarks.md), and skips otherwise.
func TestBesideDocker(t *testing.T) {
	if os.Getenv("KERNELBOX_SWARM_COMPARE") != "1" {
		t.Skip("a measurement, not a check: `make bench-swarm` runs it (KERNELBOX_SWARM_COMPARE=1)")
	}
	requireLab(t)
	testenv.Docker(t)
	if len(swarmBurst.cold) == 0 {
		t.Skip("TestSessionsSpread did not measure the swarm's burst (run the whole package)")
	}
	dockerKB, inDir := startDockerServe(t)

	const alone = 5
	swarmCold := coldStarts(t, lab.kb, "cmp-swarm", alone)
	dockerCold := coldStarts(t, dockerKB, "cmp-docker", alone)
	swarmTrivial := trivial(t, lab.kb, "cmp-swarm-warm")
	dockerTrivial := trivial(t, dockerKB, "cmp-docker-warm")

	ids := make([]string, len(swarmBurst.cold))
	for i := range ids {
		ids[i] = fmt.Sprintf("cmp-burst-%02d", i)
		require.NoError(t, os.WriteFile(filepath.Join(inDir, ids[i]+".txt"), []byte("input of "+ids[i]), 0o644))
	}
	dockerAll, dockerBurst := burst(t, dockerKB, ids, func(id string) string { return filepath.Join(inDir, id+".txt") })
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		require.NoError(t, dockerKB.CloseSession(ctx, id))
		cancel()
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n| | swarm (3-node lab) | docker (host daemon) |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| first result, a session alone (%d, one after another): p50 / p99 | %s / %s | %s / %s |\n",
		alone, pct(swarmCold, 50), pct(swarmCold, 99), pct(dockerCold, 50), pct(dockerCold, 99))
	fmt.Fprintf(&b, "| trivial cell on a warm session: p50 | %s | %s |\n", pct(swarmTrivial, 50), pct(dockerTrivial, 50))
	fmt.Fprintf(&b, "| %d sessions at once, each first result: p50 / p99 | %s / %s | %s / %s |\n", len(ids),
		pct(swarmBurst.cold, 50), pct(swarmBurst.cold, 99), pct(dockerBurst, 50), pct(dockerBurst, 99))
	fmt.Fprintf(&b, "| %d sessions at once, all first results | %s | %s |\n", len(ids),
		swarmBurst.all.Round(time.Millisecond), dockerAll.Round(time.Millisecond))
	t.Log(b.String())
}

// startDockerServe runs the lab's kernelbox binary as `serve --backend docker`
// on this host, on a unix socket, and returns its client and its input dir.
func startDockerServe(t *testing.T) (*kbclient.Client, string) {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	require.NoError(t, os.MkdirAll(in, 0o755))
	sock := filepath.Join(dir, "api.sock")
	cmd := exec.Command(lab.bin, "serve", "--backend", "docker", "--listen", "unix:"+sock,
		"--workspace", filepath.Join(dir, "ws"), "--workdir", in, "--memory", "512m", "--max-sessions", "32",
		"--on-stop", "close") // nothing outlives the test (the default keeps docker sessions)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
	})
	kb, err := kbclient.New("unix:"+sock, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := kb.Health(ctx)
		return err == nil
	}, time.Minute, 200*time.Millisecond, "kernelbox serve --backend docker answers")
	return kb, in
}

// coldStarts starts n sessions one after another and returns each first result's
// time; each session is closed before the next starts.
func coldStarts(t *testing.T, kb *kbclient.Client, prefix string, n int) []time.Duration {
	t.Helper()
	var ds []time.Duration
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		start := time.Now()
		res, err := kb.Execute(ctx, api.Request{SessionID: id, Code: "x = 41\nx + 1"})
		ds = append(ds, time.Since(start))
		require.NoError(t, err)
		require.Equal(t, "42", res.Result, "%+v", res.Error)
		require.NoError(t, kb.CloseSession(ctx, id))
		cancel()
	}
	return ds
}

// trivial runs 30 trivial cells on one warm session and returns their times.
func trivial(t *testing.T, kb *kbclient.Client, id string) []time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := kb.Execute(ctx, api.Request{SessionID: id, Code: "x = 41"})
	require.NoError(t, err)
	var ds []time.Duration
	for i := 0; i < 30; i++ {
		start := time.Now()
		res, err := kb.Execute(ctx, api.Request{SessionID: id, Code: "x + 1"})
		ds = append(ds, time.Since(start))
		require.NoError(t, err)
		require.Equal(t, "42", res.Result)
	}
	require.NoError(t, kb.CloseSession(ctx, id))
	return ds
}
