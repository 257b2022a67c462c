package workspace

import (
	"os"
	"path/filepath"

	"github.com/kernelbox/kernelbox/internal/paths"
	"golang.org/x/sys/unix"
)

// sweepTemps removes what kernelbox itself left in the session directory when
// it was killed midway (SIGKILL, a crash) and returns how many entries and bytes:
// regular files named ".kb-tmp-…" anywhere (an upload's temporary file, Put;
// a staging backup link in inputs/) and directories of that name directly in
// data/ (an AddData copy). They would otherwise stay, visible to the kernel and
// counted against the session's quota. The kernel cannot get such a name from
// kernelbox (the files API refuses it, Collect and List skip it), so a file of
// that name is kernelbox's.
//
// It runs when a directory left by an earlier incarnation is first opened,
// before anything of this Manager can have started a new temporary file in it.
// Directories are opened from the session's own handle with paths.OpenBeneath
// (no symbolic link followed at any component, nothing outside the session
// reached), one at a time, so the walk holds two descriptors however deep the
// tree; it descends only as far as a path the files API accepts
// (MaxPathBytes), since no temporary file lies deeper. A name is unlinked only
// after fstatat without following links says it is a regular file (a link of
// that name swapped in meanwhile is unlinked itself, never followed).
func (s *Session) sweepTemps() (files int, bytes int64) {
	top, err := s.root.Open(".")
	if err != nil {
		return 0, 0
	}
	defer top.Close()
	// Fd is safe here: a directory is never in the poller.
	root := int(top.Fd())
	stack := []string{"."}
	for len(stack) > 0 {
		rel := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		fd, err := paths.OpenBeneath(root, rel, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			continue // gone, or replaced by something else, since it was listed
		}
		// The name only serves ReadDir to learn an entry's type where the file
		// system does not say (a hint: every open and unlink goes by fd).
		d := os.NewFile(uintptr(fd), filepath.Join(s.dir, rel))
		for {
			entries, err := d.ReadDir(256)
			for _, e := range entries {
				name := e.Name()
				if paths.IsTemp(name) {
					if n, b := removeTemp(fd, rel, name, e.IsDir()); n > 0 {
						files, bytes = files+n, bytes+b
					}
					continue
				}
				if !e.IsDir() {
					continue
				}
				child := name
				if rel != "." {
					child = rel + "/" + name
				}
				if len(child) < MaxPathBytes {
					stack = append(stack, child)
				}
			}
			if err != nil {
				break
			}
		}
		d.Close()
	}
	if files > 0 {
		s.log.Info("removed temporary files an earlier run of kernelbox left in the session", "files", files, "bytes", bytes)
	}
	return files, bytes
}

// removeTemp removes the temporary entry name of the directory fd (rel below
// the session): a regular file anywhere, a directory only in data/.
func removeTemp(fd int, rel, name string, isDir bool) (int, int64) {
	if isDir {
		if rel != "data" || removeAllAt(fd, name, true) != nil {
			return 0, 0
		}
		return 1, 0
	}
	var st unix.Stat_t
	if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, 0
	}
	if unix.Unlinkat(fd, name, 0) != nil {
		return 0, 0
	}
	return 1, st.Size
}
