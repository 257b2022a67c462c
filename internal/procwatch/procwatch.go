// Package procwatch finds a Jupyter kernel's process through /proc and tells,
// cheaply, whether it still runs. The executor asks before every call, so that a
// kernel killed in the moment after the previous call (an OOM kill, kill -9) is
// found dead before a call is sent to it. Start reading at [FindKernel].
package procwatch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Proc is one process, held open so that its pid cannot be taken by another
// process under it: a read of an exited process's /proc file fails, whatever runs
// under that pid since. Its methods are safe for concurrent use.
type Proc struct {
	pid  int
	stat *os.File // /proc/<pid>/stat
}

// Pid returns the process id (in the reader's pid namespace).
func (p *Proc) Pid() int { return p.pid }

// Exited reports whether the process has exited: it is gone, or a zombie its
// parent has not reaped yet (a kernel's server reaps it only when its restarter
// next polls). It costs one pread of /proc/<pid>/stat, a few microseconds.
func (p *Proc) Exited() bool {
	var buf [512]byte
	n, err := p.stat.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return true
	}
	state, ok := statState(buf[:n])
	return !ok || state == 'Z' || state == 'X' || state == 'x'
}

// Close releases the process's open file.
func (p *Proc) Close() error { return p.stat.Close() }

// statState returns the state letter of a /proc/<pid>/stat line. The command name
// before it is in parentheses and may hold any bytes, ")" included, so the state is
// found after the last ")".
func statState(b []byte) (byte, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, false
	}
	return b[i+2], true
}

// FindKernel finds, among root and the processes below it, the process of the
// Jupyter kernel kernelID: the topmost one whose command line has an argument naming
// its connection file, kernel-<kernelID>.json, as Jupyter Server names it (a kernel's
// children forked without exec share its command line; they are below it). root is
// the server's process or an ancestor of it (a supervisor, a container's first
// process). It reads the children lists of /proc/<pid>/task/<tid>/children (Linux
// 3.5 and later, with CONFIG_PROC_CHILDREN).
func FindKernel(root int, kernelID string) (*Proc, error) {
	if root <= 0 || kernelID == "" || strings.ContainsAny(kernelID, "/\x00") {
		return nil, fmt.Errorf("find kernel %q below process %d: bad arguments", kernelID, root)
	}
	want := "kernel-" + kernelID + ".json"
	level := []int{root}
	seen := map[int]bool{}
	for depth := 0; len(level) > 0 && depth < maxDepth; depth++ {
		var next []int
		for _, pid := range level {
			if seen[pid] {
				continue
			}
			seen[pid] = true
			if hasArg(pid, want) {
				return open(pid)
			}
			kids, err := children(pid)
			if err != nil && pid == root {
				return nil, fmt.Errorf("find kernel %s: list the children of process %d: %w", kernelID, root, err)
			}
			next = append(next, kids...)
		}
		level = next
	}
	return nil, fmt.Errorf("find kernel %s: no process below %d has %s on its command line", kernelID, root, want)
}

// maxDepth bounds the search: a kernel is at most a few levels below its server's
// supervisor or container's first process (docker-init, timeout, the server).
const maxDepth = 8

// open opens pid's stat file and checks that the process still runs.
func open(pid int) (*Proc, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, fmt.Errorf("watch process %d: %w", pid, err)
	}
	p := &Proc{pid: pid, stat: f}
	if p.Exited() {
		_ = f.Close()
		return nil, fmt.Errorf("watch process %d: it has exited", pid)
	}
	return p, nil
}

// hasArg reports whether one of pid's command-line arguments is a path whose last
// element is name.
func hasArg(pid int, name string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	for _, arg := range bytes.Split(b, []byte{0}) {
		if len(arg) >= len(name) && filepath.Base(string(arg)) == name {
			return true
		}
	}
	return false
}

// children returns the children of every thread of pid.
func children(pid int) ([]int, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int
	var errs []error
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/children")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	if len(out) == 0 && len(errs) > 0 && len(errs) == len(tasks) {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Holder keeps the process a placement last watched, so that its open file is
// released when the next watch or the placement's close replaces it. The zero value
// holds none; it is safe for concurrent use.
type Holder struct {
	mu   sync.Mutex
	proc *Proc
}

// Set replaces the held process (nil: none), closing the previous one.
func (h *Holder) Set(p *Proc) {
	h.mu.Lock()
	old := h.proc
	h.proc = p
	h.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
}
