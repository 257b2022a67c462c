package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/workspace"
)

// adoptQuota is the adoption serve's --disk-quota (its default), which the
// cleanup needs to find a killed serve's session disks.
const adoptQuota = 4 << 30

// served is one `kernelbox serve` child of the adoption measurement.
type served struct {
	cmd   *exec.Cmd
	done  chan struct{} // closed when it has exited
	log   string        // its output's file
	owner string        // its containers' io.kernelbox.owner label
	c     *client.Client
}

// adopter runs `kernelbox serve --backend docker` on one workspace, twice.
type adopter struct {
	self, root, token string
	owners            []string
}

// start runs serve with the stop policy onStop and waits until it is healthy.
func (a *adopter) start(ctx context.Context, name, onStop string) (*served, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	s := &served{done: make(chan struct{}), log: filepath.Join(a.root, name+".log")}
	out, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	s.cmd = exec.Command(a.self, "serve", "--listen", addr, "--backend", "docker",
		"--workspace", filepath.Join(a.root, "ws"), "--workdir", filepath.Join(a.root, "data"),
		"--on-stop", onStop, "--max-sessions", "24", "--memory", "256m", "--disk-quota", strconv.Itoa(adoptQuota))
	// The token travels in the environment, never in a command line.
	s.cmd.Env = append(os.Environ(), "KERNELBOX_TOKEN="+a.token)
	s.cmd.Stdout, s.cmd.Stderr = out, out
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start serve: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	if s.owner, err = ownerOf(s.cmd.Process.Pid); err == nil {
		a.owners = append(a.owners, s.owner)
	}
	if s.c, err = client.New("http://"+addr, &client.Options{Token: a.token}); err != nil {
		a.kill(s)
		return nil, err
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if h, err := s.c.Health(ctx); err == nil && h.Status == "ok" {
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("serve exited before it was healthy: %s", a.tail(s))
		default:
		}
		if time.Now().After(deadline) {
			a.kill(s)
			return nil, fmt.Errorf("serve not healthy within 2 minutes: %s", a.tail(s))
		}
	}
}

// kill SIGKILLs s and waits for it.
func (a *adopter) kill(s *served) {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// stop ends s gracefully (SIGTERM) and waits up to 2 minutes, then kills it.
func (a *adopter) stop(s *served) {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(2 * time.Minute):
		a.kill(s)
	}
}

// tail is the end of s's output, for an error.
func (a *adopter) tail(s *served) string {
	b, _ := os.ReadFile(s.log)
	return clipNote(string(b[max(0, len(b)-600):]))
}

// ownerOf is the docker backend's owner label of the process pid: its pid and
// start time, from /proc/PID/stat.
func ownerOf(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	return strconv.Itoa(pid) + ":" + f[19], nil
}

// owned lists the containers (or with network, the networks) labelled with owner.
func owned(what, owner string) []string {
	args := []string{"ps", "-aq", "--filter", "label=io.kernelbox.created-by=kernelbox"}
	if what == "network" {
		args = []string{"network", "ls", "-q"}
	}
	out, err := exec.Command("docker", append(args, "--filter", "label=io.kernelbox.owner="+owner)...).Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// cleanup removes what the two serves left (nothing, when they closed their
// sessions) and returns how many containers and networks that was.
func (a *adopter) cleanup() int {
	left := 0
	for _, o := range a.owners {
		if ids := owned("container", o); len(ids) > 0 {
			left += len(ids)
			_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
		}
		if ids := owned("network", o); len(ids) > 0 {
			left += len(ids)
			_ = exec.Command("docker", append([]string{"network", "rm"}, ids...)...).Run()
		}
	}
	// A killed serve leaves its session disks mounted; opening the workspace with
	// the quota unmounts them, as serve's next start does.
	if m, err := workspace.New(workspace.Options{Root: filepath.Join(a.root, "ws"), DiskQuota: adoptQuota}); err == nil {
		m.Close()
	}
	return left
}

// each runs f for sessions 0..n-1, at most par at once, and joins their errors.
func each(n, par int, f func(i int) error) error {
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f(i)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// adoptID names the adoption measurement's session i.
func adoptID(i int) string { return fmt.Sprintf("adopt%02d", i) }

// callX runs code on session i through c, within 3 minutes, and checks that it
// answers want without losing its state.
func callX(ctx context.Context, c *client.Client, i int, code, want string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	r, err := c.Execute(ctx, api.Request{SessionID: adoptID(i), Code: code})
	d := time.Since(t0)
	if err != nil {
		return d, fmt.Errorf("%s: %w", adoptID(i), err)
	}
	if r.Status != api.StatusOK || r.Result != want || r.StateLost {
		return d, fmt.Errorf("%s: %s answered %q, want %q (state lost %v, %v)", adoptID(i), code, r.Result, want, r.StateLost, r.Notes)
	}
	return d, nil
}

// randomToken is a fresh bearer token for the adoption serves.
func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// adoption measures issue 34's restart: AdoptSessions docker sessions with x set,
// a SIGKILL of their serve, and the time from starting serve again to every
// session listed by GET /v1/sessions and answering x. It runs the kernelbox
// binary itself (Config.Self) and removes every container it made.
func (r *runner) adoption(ctx context.Context) ([]Row, error) {
	n := r.c.AdoptSessions
	if n <= 0 {
		n = r.iters(5, 20)
	}
	title := fmt.Sprintf("%s: serve start to %d adopted sessions answering", r.backend, n)
	switch {
	case !r.spec.Containers:
		return []Row{{Name: r.backend + ": adoption after a SIGKILL of serve", Note: "NOT MEASURED: local kernels are serve's children and die with it (a graceful stop hibernates them instead)"}}, nil
	case r.c.Self == "":
		return []Row{{Name: title, Note: "NOT MEASURED: no kernelbox binary to run serve (Config.Self)"}}, nil
	}
	root, err := os.MkdirTemp(r.dir, "adopt-")
	if err != nil {
		return nil, err
	}
	a := &adopter{self: r.c.Self, root: root, token: randomToken()}
	row, err := a.measure(ctx, n)
	if left := a.cleanup(); left > 0 {
		row.Note += fmt.Sprintf("; %d containers or networks were left and removed", left)
		err = errors.Join(err, fmt.Errorf("adoption: %d containers or networks left after the close", left))
	}
	row.Name = title
	if err != nil && row.N == 0 {
		row.Note = "NOT MEASURED: " + clipNote(err.Error())
	}
	return []Row{row}, err
}

// measure runs the two serves: n sessions with x = 7i on the first, a SIGKILL,
// the second started and timed until every session answers.
func (a *adopter) measure(ctx context.Context, n int) (Row, error) {
	s1, err := a.start(ctx, "serve1", "keep")
	if err != nil {
		return Row{}, err
	}
	err = each(n, 4, func(i int) error {
		_, err := callX(ctx, s1.c, i, fmt.Sprintf("x = %d; x", 7*i), strconv.Itoa(7*i))
		return err
	})
	a.kill(s1)
	if err != nil {
		return Row{}, fmt.Errorf("open the sessions: %w", err)
	}
	t0 := time.Now()
	s2, err := a.start(ctx, "serve2", "close")
	if err != nil {
		return Row{}, fmt.Errorf("start again: %w", err)
	}
	defer a.stop(s2)
	healthy := time.Since(t0)
	list, err := s2.c.Sessions(ctx)
	if err != nil {
		return Row{}, fmt.Errorf("GET /v1/sessions: %w", err)
	}
	listed := time.Since(t0)
	have := map[string]bool{}
	for _, s := range list {
		have[s.ID] = true
	}
	answers := make([]float64, n)
	err = each(n, n, func(i int) error {
		if !have[adoptID(i)] {
			return fmt.Errorf("%s is not listed after the restart", adoptID(i))
		}
		d, err := callX(ctx, s2.c, i, "x", strconv.Itoa(7*i))
		answers[i] = ms(d)
		return err
	})
	took := time.Since(t0)
	if err != nil {
		return Row{}, fmt.Errorf("after the restart: %w", err)
	}
	kept, created := len(owned("container", s1.owner)), len(owned("container", s2.owner))
	cerr := each(n, 4, func(i int) error { return s2.c.CloseSession(ctx, adoptID(i)) })
	return Row{N: n, KB50: ms(took), KB99: ms(took),
		Note: fmt.Sprintf("healthy after %.0f ms, all listed after %.0f ms, each x answered (p50 %.0f ms, slowest %.0f ms); %d containers adopted, %d new; goal <= 3 s; no same-run reference (E2B reports sandboxes lost when its orchestrator restarts)",
			ms(healthy), ms(listed), percentile(answers, .5), percentile(answers, 1), kept, created)}, cerr
}
