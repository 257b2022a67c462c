// Package procs reads process facts from /proc (Linux): descendants, resident memory,
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
func Owned(owner int) []int {
	want := []byte(OwnerEnv + "=" + strconv.Itoa(owner) + "\x00")
	var out []int
	for _, pid := range all() {
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		if err != nil {
			continue
		}
		if bytes.Contains(append(env, 0), want) && !zombie(pid) {
			out = append(out, pid)
		}
	}
	return out
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

func zombie(pid int) bool {
	f := stat(pid)
	return len(f) > 0 && f[0] == "Z"
}
