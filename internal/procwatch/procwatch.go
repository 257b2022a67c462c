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

// FindKernel finds the process of the Jupyter kernel kernelID: the child of the
// server process whose command line has an argument naming its connection file,
// kernel-<kernelID>.json, as Jupyter Server names it. Only the server's own children
// count: code in a sandbox can start a process with any command line, and one it
// orphans is adopted by the container's first process (above the server), never by
// the server, so a look below the server alone cannot be led to a decoy. Find the
// server with [FindServer]. It reads the children lists of
// /proc/<pid>/task/<tid>/children (Linux 3.5 and later, with CONFIG_PROC_CHILDREN).
func FindKernel(server int, kernelID string) (*Proc, error) {
	if server <= 0 || kernelID == "" || strings.ContainsAny(kernelID, "/\x00") {
		return nil, fmt.Errorf("find kernel %q below process %d: bad arguments", kernelID, server)
	}
	want := "kernel-" + kernelID + ".json"
	kids, err := children(server)
	if err != nil {
		return nil, fmt.Errorf("find kernel %s: list the children of process %d: %w", kernelID, server, err)
	}
	for _, pid := range kids {
		if hasArg(pid, want) {
			return open(pid)
		}
	}
	return nil, fmt.Errorf("find kernel %s: no child of the server (process %d) has %s on its command line", kernelID, server, want)
}

// FindServer finds the Jupyter server's process at or below root (the server's
// supervisor, or the container's first process with the server a few levels below
// it): the first process, from root down through the OLDEST child at each level,
// that runs the script launcher (the server's launcher: the last element of the
// first argument after the program that is not an option; a supervisor that names
// the launcher further on does not count). Processes started by code in the sandbox
// are always younger than the server, so none of them is on that path, whatever
// its command line says.
func FindServer(root int, launcher string) (int, error) {
	if root <= 0 || launcher == "" {
		return 0, fmt.Errorf("find server %q at or below process %d: bad arguments", launcher, root)
	}
	pid := root
	for depth := 0; depth < maxDepth; depth++ {
		if runsScript(pid, launcher) {
			return pid, nil
		}
		kids, err := children(pid)
		if err != nil {
			return 0, fmt.Errorf("find server: list the children of process %d: %w", pid, err)
		}
		next, ok := oldest(kids)
		if !ok {
			break
		}
		pid = next
	}
	return 0, fmt.Errorf("find server: no process on the path of oldest children from %d runs %s", root, launcher)
}

// maxDepth bounds FindServer's walk: the server is at most a few levels below the
// container's first process (docker-init, timeout, the server).
const maxDepth = 8

// oldest returns the pid of pids that started first (field 22 of /proc/<pid>/stat,
// in clock ticks since boot); pids that cannot be read are passed over.
func oldest(pids []int) (int, bool) {
	best, bestStart, found := 0, uint64(0), false
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		start, ok := statStart(b)
		if ok && (!found || start < bestStart) {
			best, bestStart, found = pid, start, true
		}
	}
	return best, found
}

// statStart returns the start time of a /proc/<pid>/stat line (field 22, counted
// after the command name, which may hold any bytes).
func statStart(b []byte) (uint64, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(f[19], 10, 64)
	return n, err == nil
}

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

// runsScript reports whether pid's first argument after the program that is not an
// option is a path whose last element is script, as an interpreter's command line
// names the script it runs.
func runsScript(pid int, script string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := bytes.Split(bytes.TrimSuffix(b, []byte{0}), []byte{0})
	for _, arg := range args[1:] {
		if !bytes.HasPrefix(arg, []byte("-")) {
			return filepath.Base(string(arg)) == script
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
