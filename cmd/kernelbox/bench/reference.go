package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// reference drives bench/reference.py: the same work straight over ZMQ with
// jupyter_client, or with plain file copies, in a long-lived Python process so its
// measurements interleave with kernelbox's.
type reference struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

type refAnswer struct {
	MS    []float64 `json:"ms"`
	Bytes int64     `json:"bytes"`
	Error string    `json:"error"`
}

func startReference(ctx context.Context, python, script string) (*reference, error) {
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("reference script: %w (run the benchmark from the repository root or pass --reference)", err)
	}
	cmd := exec.CommandContext(ctx, python, "-Xfrozen_modules=off", script)
	cmd.Env = append(os.Environ(), "PYDEVD_DISABLE_FILE_VALIDATION=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start reference: %w", err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	return &reference{cmd: cmd, in: in, out: sc}, nil
}

func (r *reference) do(args ...string) (*refAnswer, error) {
	if _, err := fmt.Fprintln(r.in, strings.Join(args, " ")); err != nil {
		return nil, fmt.Errorf("reference %s: %w", args[0], err)
	}
	if !r.out.Scan() {
		return nil, fmt.Errorf("reference %s: no answer (%v)", args[0], r.out.Err())
	}
	var a refAnswer
	if err := json.Unmarshal(r.out.Bytes(), &a); err != nil {
		return nil, fmt.Errorf("reference %s: %w", args[0], err)
	}
	if a.Error != "" {
		return nil, fmt.Errorf("reference %s: %s", args[0], a.Error)
	}
	return &a, nil
}

func (r *reference) close() {
	_, _ = fmt.Fprintln(r.in, "quit")
	r.in.Close()
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
}
