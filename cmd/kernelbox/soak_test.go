package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/internal/procs"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// soakDuration is how long TestServeSoak runs its mixed load on each backend:
// KERNELBOX_SOAK_DURATION (a Go duration; the README's figures come from 20m), or
// 45 s, which make test runs.
func soakDuration(t *testing.T) time.Duration {
	if v := os.Getenv("KERNELBOX_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "KERNELBOX_SOAK_DURATION")
		return d
	}
	return 45 * time.Second
}

// TestServeSoak runs `kernelbox serve` under a mixed load with faults, as an
// outside user would: calls that succeed, raise, time out, die (os._exit, a
// SIGKILL 50 ms after the call), ignore SIGINT, print, write artifacts and
// sparse files; resets, closes and uploads racing them; pauses long enough for
// the idle timeout to close sessions; more session ids than --max-sessions. Then
// it checks what the issue asked to hold: no call hung, none failed with an
// internal error, and once every session is closed for idleness nothing of them
// is left: no kernel process or container but the warm pool's, no session disk
// mounted, no loop device bound to one, the kept disk images bounded; and after
// SIGTERM nothing at all.
func TestServeSoak(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the soak checks session disks, which need root")
	}
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			// The two soaks run at once (each against a server of its own, and
			// every count is of its own server: its pid, owner label, workspace):
			// each spends most of its 45 s waiting on sleeps, timeouts and pauses.
			t.Parallel()
			args := []string{"--backend", backend}
			switch backend {
			case "local":
				args = append(args, "--python", testenv.Jupyter(t))
			case "docker":
				testenv.Docker(t)
			}
			soakServe(t, backend, args)
		})
	}
}

// soakIdle is the idle timeout the soak's server runs with.
const soakIdle = 4 * time.Second

func soakServe(t *testing.T, backend string, backendArgs []string) {
	s := startServeWith(t, serveOpts{token: "soak-token", backend: backendArgs, args: []string{
		"--disk-quota", "64MiB", "--max-sessions", "8", "--idle-timeout", soakIdle.String(),
		"--warm", "1", "--timeout", "30s",
	}})
	c, err := client.New(s.URL, &client.Options{Token: s.Token})
	require.NoError(t, err)
	wsRoot := serveWorkspace(t, s.Pid)
	owner := ownerLabel(t, s.Pid)

	dur := soakDuration(t)
	counts := map[string]int{}
	var mu sync.Mutex
	count := func(k string) { mu.Lock(); counts[k]++; mu.Unlock() }
	var slowest time.Duration
	var slowestOp string
	start := time.Now()
	var wg sync.WaitGroup
	kills := &soakKills{at: map[string]time.Time{}}
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			for time.Since(start) < dur {
				op, took, outcome := soakOp(c, rng, kills)
				count(op + ": " + outcome)
				mu.Lock()
				if took > slowest {
					slowest, slowestOp = took, op
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	keys := make([]string, 0, len(counts))
	total := 0
	for k, n := range counts {
		keys = append(keys, fmt.Sprintf("%6d  %s", n, k))
		total += n
	}
	sort.Strings(keys)
	t.Logf("%s soak: %d operations in %s, slowest %s (%s):\n%s", backend, total,
		time.Since(start).Round(time.Second), slowest.Round(time.Millisecond), slowestOp, strings.Join(keys, "\n"))
	for k, n := range counts {
		require.False(t, strings.HasSuffix(k, ": hung"), "%d operations hung (%s)", n, k)
		require.False(t, strings.Contains(k, "internal_error") || strings.Contains(k, "(500)"),
			"%d operations failed with an internal error (%s); server log:\n%s", n, k, s.log)
		// A kernel that died before a call (killed 50 ms after the previous
		// one) must not use the call up: only the code that kills its own kernel
		// may end kernel_died.
		op, outcome, _ := strings.Cut(k, ": ")
		if strings.HasPrefix(outcome, "kernel_died") && !strings.HasSuffix(outcome, soakDuring) {
			require.Contains(t, []string{"exit", "kill-after"}, op, "%d %q calls were used up by a kernel that died before them", n, op)
		}
	}

	// Every session is closed for idleness within the idle timeout (plus the
	// executor's sweep); then only the warm pool's kernel may be left.
	require.Eventually(t, func() bool {
		ss, err := c.Sessions(context.Background())
		return err == nil && len(ss) == 0
	}, soakIdle+60*time.Second, 250*time.Millisecond, "sessions left open after the idle timeout")
	var left soakLeft
	if !assert.Eventually(t, func() bool {
		left = soakCount(t, backend, s.Pid, owner, wsRoot)
		return left.kernels <= 1 && left.mounts <= 1 && left.loops <= 1
	}, 60*time.Second, 500*time.Millisecond, "after every session was closed: %+v", &left) {
		// What the server did, for the next person to read (the last 400 lines).
		lines := strings.Split(s.log.String(), "\n")
		t.Fatalf("server log (end):\n%s", strings.Join(lines[max(0, len(lines)-400):], "\n"))
	}
	t.Logf("%s soak: after the idle closes: %+v", backend, left)
	images, _ := filepath.Glob(filepath.Join(wsRoot, "disks", "*.img"))
	require.LessOrEqual(t, len(images), 64, "kept disk images: %v", images)

	// SIGTERM: nothing at all.
	require.NoError(t, syscall.Kill(s.Pid, syscall.SIGTERM))
	require.Eventually(t, func() bool {
		left = soakCount(t, backend, s.Pid, owner, wsRoot)
		return left == soakLeft{}
	}, 60*time.Second, 500*time.Millisecond, "after SIGTERM: %+v", &left)
}

// soakOp runs one random operation and names it with its outcome: a Result's
// status (and state_lost), an API error's code, or "hung".
func soakOp(c *client.Client, rng *rand.Rand, kills *soakKills) (op string, took time.Duration, outcome string) {
	session := fmt.Sprintf("soak%d", rng.IntN(6))
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	begin := time.Now()
	defer func() {
		took = time.Since(begin)
		if ctx.Err() != nil {
			outcome = "hung"
		}
	}()
	run := func(name, code string, timeout time.Duration) (string, time.Duration, string) {
		r, err := c.Execute(ctx, api.Request{SessionID: session, Code: code, Timeout: timeout})
		if name == "kill-after" {
			kills.note(session, time.Now())
		}
		if err != nil {
			return name, 0, soakErr(err)
		}
		o := string(r.Status)
		if r.StateLost {
			o += "+state_lost"
		}
		if r.Status == api.StatusKernelDied && kills.landedDuring(session, begin) {
			o += soakDuring
		}
		return name, 0, o
	}
	switch p := rng.IntN(100); {
	case p < 30:
		return run("count", "x = globals().get('x', 0) + 1\nx", 0)
	case p < 35:
		return run("raise", "1/0", 0)
	case p < 40:
		return run("print", "print('y' * 100000)", 0)
	case p < 45:
		return run("timeout", "import time\ntime.sleep(5)", 2*time.Second)
	case p < 53:
		return run("exit", "import os\nos._exit(1)", 0)
	case p < 57:
		return run("kill-after", "import os, signal, threading\nthreading.Timer(0.05, os.kill, (os.getpid(), signal.SIGKILL)).start()", 0)
	case p < 59:
		return run("ignore-sigint", "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(4)", 2*time.Second)
	case p < 63:
		return run("artifact", "import os\nos.makedirs('outputs', exist_ok=True)\nopen('outputs/a.txt', 'w').write('z' * 10000)", 0)
	case p < 65:
		return run("sparse", "import os\nos.makedirs('outputs', exist_ok=True)\nopen('outputs/sparse.bin', 'w').truncate(1 << 30)", 0)
	case p < 75:
		err := c.ResetSession(ctx, session)
		return "reset", 0, soakErr(err)
	case p < 83:
		err := c.CloseSession(ctx, session)
		return "close", 0, soakErr(err)
	case p < 90:
		_, err := c.Upload(ctx, session, "inputs/up.bin", bytes.NewReader(make([]byte, 1<<20)), nil)
		return "upload", 0, soakErr(err)
	case p < 94:
		_, err := c.List(ctx, session, "", 100)
		return "list", 0, soakErr(err)
	default:
		// A pause as long as the idle timeout, so that sessions are closed for
		// idleness (and reopened) while the load goes on.
		time.Sleep(soakIdle + time.Second)
		return "pause", 0, "ok"
	}
}

// soakDuring marks a kernel_died outcome of a call that was already under way,
// or queued, when another worker's kill-after timer (50 ms after that call
// returned) killed the session's kernel: a death during the call, which it
// reports honestly, not a death before it that should not have used it up.
const soakDuring = " (killed during it by an earlier cell's timer)"

// soakKills remembers, per session, when its last kill-after call returned.
type soakKills struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (k *soakKills) note(session string, returned time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.at[session] = returned
}

// landedDuring reports whether the session's last kill-after timer could have
// fired after a call that began at begin was sent: the call began before the
// timer was due plus 250 ms for the SIGKILL and its news to arrive.
func (k *soakKills) landedDuring(session string, begin time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	r, ok := k.at[session]
	return ok && begin.Before(r.Add(300*time.Millisecond))
}

// soakErr names an error by its API code ("ok" for none).
func soakErr(err error) string {
	var ae *client.APIError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ae):
		return fmt.Sprintf("%s (%d)", ae.Code, ae.StatusCode)
	default:
		return "error: " + err.Error()
	}
}

// soakLeft is what is left of a server's sessions on the host.
type soakLeft struct {
	kernels int // kernel processes (local) or containers (docker) of the server
	mounts  int // session disks mounted under its workspace
	loops   int // loop devices bound to its workspace's disk images
}

// soakCount counts what the server with pid serve (docker owner label owner, whose
// workspace is wsRoot) has on the host.
func soakCount(t *testing.T, backend string, serve int, owner, wsRoot string) soakLeft {
	var l soakLeft
	switch backend {
	case "local":
		for _, pid := range procs.Owned(serve) {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			args := strings.Split(string(b), "\x00")
			for i, a := range args {
				if a == "-f" && i+1 < len(args) && strings.Contains(args[i+1], "kernel-") {
					l.kernels++
					break
				}
			}
		}
	case "docker":
		out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=io.kernelbox.created-by=kernelbox",
			"--filter", "label=io.kernelbox.owner="+owner).Output()
		require.NoError(t, err)
		l.kernels = len(strings.Fields(string(out)))
	}
	mi, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer mi.Close()
	sc := bufio.NewScanner(mi)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 4 && strings.HasPrefix(f[4], wsRoot+"/") {
			l.mounts++
		}
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, p := range loops {
		b, _ := os.ReadFile(p)
		if strings.HasPrefix(strings.TrimSpace(string(b)), wsRoot+"/") {
			l.loops++
		}
	}
	return l
}

// ownerLabel is the docker backend's owner label for the process pid:
// "<pid>:<start time>" (backends/docker/owner.go).
func ownerLabel(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	return strconv.Itoa(pid) + ":" + f[19]
}

// serveWorkspace returns the --workspace of the serve process pid, made absolute
// and with symlinks resolved, as the mount table shows it.
func serveWorkspace(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	require.NoError(t, err)
	args := strings.Split(string(b), "\x00")
	for i, a := range args {
		if a == "--workspace" && i+1 < len(args) {
			p, err := filepath.EvalSymlinks(args[i+1])
			require.NoError(t, err)
			return p
		}
	}
	t.Fatal("serve has no --workspace")
	return ""
}
