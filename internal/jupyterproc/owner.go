package jupyterproc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// runtimePrefix names the runtime directories under the temp dir.
const runtimePrefix = "kernelbox-"

// ownerFile, in each runtime directory, names the kernelbox process that made it:
// "PID STARTTIME PIDNS", STARTTIME being field 22 of /proc/PID/stat (so a reused pid
// is not mistaken for the owner) and PIDNS the owner's pid namespace (a kernelbox in
// another namespace sharing the temp dir is not judged by pids it cannot see).
const ownerFile = "owner"

// ownerID returns this process's owner line.
func ownerID() (string, error) {
	pid := os.Getpid()
	st := startTime(pid)
	if st == "" {
		return "", fmt.Errorf("read /proc/%d/stat", pid)
	}
	return fmt.Sprintf("%d %s %s", pid, st, pidNamespace()), nil
}

func startTime(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

func pidNamespace() string {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return ns
}

// writeOwner records this process as the owner of a runtime directory.
func writeOwner(dir string) error {
	id, err := ownerID()
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, ownerFile), []byte(id+"\n"), 0o600)
	}
	if err != nil {
		return fmt.Errorf("jupyter server: runtime dir owner: %w", err)
	}
	return nil
}

// ownerDead reports whether the owner line names a process of this pid namespace
// that no longer runs.
func ownerDead(line string) bool {
	f := strings.Fields(line)
	if len(f) != 3 || f[2] != pidNamespace() {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return false
	}
	return startTime(pid) != f[1]
}

// RemoveStale removes the runtime directories under tmp (the temp dir when empty)
// that belong to this user and whose owning kernelbox process is dead (killed before
// it could clean up), and returns those it removed. A directory without an owner
// file is left alone: it may be one being made right now.
func RemoveStale(tmp string) []string {
	if tmp == "" {
		tmp = os.TempDir()
	}
	dirs, _ := filepath.Glob(filepath.Join(tmp, runtimePrefix+"*"))
	var removed []string
	for _, d := range dirs {
		st, err := os.Lstat(d)
		if err != nil || !st.IsDir() {
			continue
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil || !ownerDead(string(b)) {
			continue
		}
		if os.RemoveAll(d) == nil {
			removed = append(removed, d)
		}
	}
	return removed
}
