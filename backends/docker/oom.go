package docker

// How OOM kills are detected. When only the kernel process (a child of Jupyter
// Server) is OOM-killed, the server restarts the kernel and the container keeps
// running. Measured on Docker 20.10 with cgroup v1 (Debian bookworm's docker.io):
// State.OOMKilled stays false while the container runs - it only turns true once the
// container exits, for any earlier OOM kill in it - so it cannot report a kernel's
// death. What does count every kill is the kernel's own counter for the container's
// memory cgroup: "oom_kill" in memory.oom_control (cgroup v1, Linux >= 4.13) or in
// memory.events (cgroup v2). The backend reads that counter from the host, and falls
// back to counting the daemon's "oom" events for the container when the cgroup file
// cannot be read (kernelbox in a container without the host's /sys/fs/cgroup, or a
// daemon in a VM). The event history is a bounded in-memory buffer in the daemon,
// hence it is only the fallback.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
)

// cgroupRoot is where the host's cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// oomCounterFile finds the file holding the OOM-kill counter of the memory cgroup of
// container id, whose main process is pid on the host. It tries the cgroup the
// process reports, then the paths Docker's cgroupfs and systemd drivers use.
func oomCounterFile(pid int, id string) (string, error) {
	var candidates []string
	if pid > 0 {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil {
			v1, v2 := parseProcCgroup(b)
			if v1 != "" {
				candidates = append(candidates, filepath.Join(cgroupRoot, "memory", v1, "memory.oom_control"))
			}
			if v2 != "" {
				candidates = append(candidates, filepath.Join(cgroupRoot, v2, "memory.events"))
			}
		}
	}
	candidates = append(candidates,
		filepath.Join(cgroupRoot, "memory", "docker", id, "memory.oom_control"),
		filepath.Join(cgroupRoot, "memory", "system.slice", "docker-"+id+".scope", "memory.oom_control"),
		filepath.Join(cgroupRoot, "system.slice", "docker-"+id+".scope", "memory.events"),
		filepath.Join(cgroupRoot, "docker", id, "memory.events"),
	)
	var errs []error
	for _, f := range candidates {
		if _, err := readOOMKills(f); err != nil {
			errs = append(errs, err)
			continue
		}
		return f, nil
	}
	return "", fmt.Errorf("no readable OOM counter for container %s: %w", dockerapi.Short(id), errors.Join(errs...))
}

// parseProcCgroup returns the memory controller's cgroup path (cgroup v1) and the
// unified hierarchy's path (cgroup v2) from the contents of /proc/<pid>/cgroup.
func parseProcCgroup(b []byte) (v1Memory, v2 string) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		hier, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		controllers, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if hier == "0" && controllers == "" {
			v2 = p
			continue
		}
		for _, c := range strings.Split(controllers, ",") {
			if c == "memory" {
				v1Memory = p
			}
		}
	}
	return v1Memory, v2
}

// readOOMKills reads the "oom_kill N" entry of a memory.oom_control or memory.events
// file.
func readOOMKills(file string) (uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return parseOOMKills(b)
}

// parseOOMKills extracts the "oom_kill" count from "key value" lines.
func parseOOMKills(b []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == "oom_kill" {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("no oom_kill entry (kernel older than 4.13?)")
}

// oomEvents counts the daemon's "oom" events for container id since the given time.
func (b *Backend) oomEvents(ctx context.Context, id string, since time.Time) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	now := time.Now()
	res := b.api.Events(ctx, client.EventsListOptions{
		Since: fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond()),
		Until: fmt.Sprintf("%d.%09d", now.Unix(), now.Nanosecond()),
		Filters: make(client.Filters).
			Add("type", "container").
			Add("container", id).
			Add("event", "oom"),
	})
	var n uint64
	for {
		select {
		case <-res.Messages:
			n++
		case err := <-res.Err:
			// The stream ends with io.EOF once it has passed Until.
			if err == nil || errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, fmt.Errorf("docker events: %w", err)
		}
	}
}

// formatBytes writes a memory size as "2.0 GiB" or "256 MiB".
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
