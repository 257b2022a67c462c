//go:build linux

package procs

import (
	"bufio"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
)

// A process that still holds a file open for writing may not be done with it
// (workspace asks this of the outputs a call left: a background thread or child
// of an earlier call, or this call's own code left running). Linux lists every process's descriptors under /proc/<pid>/fd, and
// /proc/<pid>/fdinfo/<n> says how each was opened. Only the processes this one may
// inspect are seen (the same user, or all of them as root), which covers the local
// backend and, with kernelbox as root or as the kernel's user, Docker containers:
// their processes are the host's, and a descriptor on a bind-mounted file stats as
// the host file.
//
// Reading a descriptor's link costs the kernel a few microseconds, ~5 ms for the
// ~900 descriptors of a small host, so only the processes running as the owner of
// one of the files are looked at: the kernel's processes (the local backend's run
// as kernelbox's user, a container's as its one user) create what outputs/ holds.
// A writer running as another user is not seen.

// FileID is a file's device and inode.
type FileID struct{ Dev, Ino uint64 }

// OpenForWriting returns which of files some process holds open for writing
// (O_WRONLY or O_RDWR), looking at the processes whose uid is in owners. names are
// the files' base names: a descriptor is stat-ed only when its link ends in one of
// them, so the cost is one readlink per descriptor of those processes.
func OpenForWriting(files map[FileID]bool, names map[string]bool, owners map[uint32]bool) map[FileID]bool {
	procs, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer procs.Close()
	pids, err := procs.Readdirnames(-1)
	if err != nil {
		return nil
	}
	found := map[FileID]bool{}
	for _, pid := range pids {
		if pid == "" || pid[0] < '0' || pid[0] > '9' {
			continue
		}
		// /proc/<pid> belongs to the process's effective uid.
		var ps syscall.Stat_t
		if syscall.Stat("/proc/"+pid, &ps) != nil || !owners[ps.Uid] {
			continue
		}
		fdDir := "/proc/" + pid + "/fd/"
		d, err := os.Open(fdDir)
		if err != nil {
			continue // gone, or not ours to inspect
		}
		fds, _ := d.Readdirnames(-1)
		d.Close()
		for _, fd := range fds {
			link, err := os.Readlink(fdDir + fd)
			if err != nil || !strings.HasPrefix(link, "/") {
				continue // a socket, pipe or anonymous inode
			}
			// Inside a container the link is the container's path; the name is
			// the same.
			if !names[path.Base(strings.TrimSuffix(link, " (deleted)"))] {
				continue
			}
			var st syscall.Stat_t
			if syscall.Stat(fdDir+fd, &st) != nil {
				continue
			}
			id := FileID{uint64(st.Dev), uint64(st.Ino)}
			if !files[id] || found[id] {
				continue
			}
			if flags, ok := fdFlags("/proc/" + pid + "/fdinfo/" + fd); ok && flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0 {
				found[id] = true
			}
		}
	}
	return found
}

// fdFlags reads the open flags from a /proc/<pid>/fdinfo/<n> file ("flags:" in
// octal).
func fdFlags(name string) (int, bool) {
	f, err := os.Open(name)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "flags:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			return int(n), err == nil
		}
	}
	return 0, false
}
