// Package procs reads process facts from /proc (Linux): descendants, resident memory,
// which processes hold a file open for writing (OpenForWriting, writers_linux.go),
// and the processes kernelbox started, found by the KERNELBOX_OWNER_PID variable that
// every Jupyter Server kernelbox starts (and so every kernel) carries in its
// environment, which survives reparenting.
package procs

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// OwnerEnv is the environment variable naming the kernelbox process that started a
// server or kernel.
const OwnerEnv = "KERNELBOX_OWNER_PID"

// Owned returns the pids of live processes whose environment has OwnerEnv=owner.
func Owned(owner int) []int { return WithEnv(OwnerEnv + "=" + strconv.Itoa(owner)) }

// WithEnv returns the pids of live processes whose environment has the entry kv
// (NAME=VALUE), which survives reparenting.
func WithEnv(kv string) []int {
	want := []byte("\x00" + kv + "\x00")
	var out []int
	for _, pid := range all() {
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		if err != nil {
			continue
		}
		env = append(append([]byte{0}, env...), 0) // every entry between NULs
		if bytes.Contains(env, want) && !zombie(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// IsKernel reports whether pid is a Jupyter kernel: a process started with a
// kernel connection file (kernel-ID.json) among its arguments, whatever its language.
func IsKernel(pid int) bool {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	for _, arg := range strings.Split(string(b), "\x00") {
		name := filepath.Base(arg)
		if strings.HasPrefix(name, "kernel-") && strings.HasSuffix(name, ".json") {
			return true
		}
	}
	return false
}

// Descendants lists every process below pid.
func Descendants(pid int) []int {
	children := map[int][]int{}
	for _, p := range all() {
		if pp := ppid(p); pp > 0 {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// RSS returns a process's resident set size in bytes, or 0.
func RSS(pid int) float64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// Cmdline returns a process's command line with arguments joined by spaces.
func Cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

func all() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if p, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// stat returns the fields of /proc/pid/stat after the command name.
func stat(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

func ppid(pid int) int {
	f := stat(pid)
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// Alive reports whether process pid exists and has not ended (a zombie has).
func Alive(pid int) bool {
	f := stat(pid)
	return len(f) > 0 && f[0] != "Z"
}

func zombie(pid int) bool {
	f := stat(pid)
	return len(f) > 0 && f[0] == "Z"
}

// socketInodes returns the inodes of the sockets a process holds open.
func socketInodes(pid int) map[string]bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, _ := os.ReadDir(dir)
	out := map[string]bool{}
	for _, e := range entries {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if ino, ok := strings.CutPrefix(l, "socket:["); ok {
			out[strings.TrimSuffix(ino, "]")] = true
		}
	}
	return out
}

// TCPListeners returns the local addresses (as /proc/net/tcp writes them, hex
// address:port) of the TCP sockets in state LISTEN that a process holds open, IPv4
// and IPv6.
func TCPListeners(pid int) []string {
	inodes := socketInodes(pid)
	var out []string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) >= 10 && f[3] == "0A" && inodes[f[9]] {
				out = append(out, f[1])
			}
		}
	}
	return out
}

// UnixSockets returns the filesystem paths of the bound unix sockets a process holds
// open (abstract and unnamed sockets are left out).
func UnixSockets(pid int) []string {
	inodes := socketInodes(pid)
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		// Num RefCount Protocol Flags Type St Inode Path
		f := strings.Fields(line)
		if len(f) >= 8 && inodes[f[6]] && strings.HasPrefix(f[7], "/") {
			out = append(out, f[7])
		}
	}
	return out
}
