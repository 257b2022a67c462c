package workspace

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// disks makes, mounts and removes the per-session disks that enforce
// Options.DiskQuota (disk_linux.go has the mechanism). The methods that mount
// or unmount run under Manager.mu.
type disks struct {
	dir   string // <Root>/disks, 0700
	size  int64
	mkfs  string
	mount string
	// off says why sessions get no disk of their own ("" when they do); then
	// EnforceDiskQuota is the only limit.
	off string
	// sessionsDev is the device of sessions/: a session directory on another
	// device has its disk mounted.
	sessionsDev uint64
}

// diskImagesDir is the directory below Root holding the session disk images.
const diskImagesDir = "disks"

// DiskQuota reports the per-session disk limit (0 when there is none) and, when
// it is set but not enforced by a file system of each session's own, why not.
// Then only EnforceDiskQuota, run after each call, holds sessions to it.
func (m *Manager) DiskQuota() (limit int64, unenforced string) {
	if m.disks == nil {
		return 0, ""
	}
	return m.disks.size, m.disks.off
}

// setupDisks prepares session disks when Options.DiskQuota is set, and removes
// what an earlier run left: mounts below sessions/ (a crash leaves them) and
// images whose session directory is gone.
func (m *Manager) setupDisks() {
	if m.opts.DiskQuota <= 0 {
		return
	}
	d := &disks{dir: filepath.Join(m.root, diskImagesDir), size: m.opts.DiskQuota}
	m.disks = d
	var err error
	if m.opts.DiskQuotaCheckOnly {
		err = errors.New("DiskQuotaCheckOnly is set")
	} else {
		d.mkfs, d.mount, err = diskTools()
	}
	if err == nil {
		err = mkdirMode(d.dir, 0o700, true)
	}
	if err == nil {
		var fi fs.FileInfo
		if fi, err = os.Stat(m.sessionsDir); err == nil {
			d.sessionsDev = devOf(fi)
		}
	}
	if err == nil {
		err = d.probe()
	}
	if err != nil {
		d.off = err.Error()
		m.log.Warn("disk quota is only checked after each call: sessions get no disk of their own", "reason", d.off)
		return
	}
	m.log.Info("disk quota: each session directory is a loop-mounted ext4 of its own", "bytes", d.size, "images", d.dir)
	m.unmountAll()
	names, _ := readNames(d.dir)
	for _, n := range names {
		id, ok := strings.CutSuffix(n, ".img")
		if !ok {
			continue
		}
		if _, err := m.sessions.Lstat(id); err == nil && !isWarmID(id) {
			continue // mounted again when the session is opened
		}
		if err := os.Remove(filepath.Join(d.dir, n)); err != nil {
			m.log.Warn("could not remove a session disk left by an earlier run", "image", n, "err", err)
		}
	}
}

// probe makes and mounts a small disk, to learn whether session disks can be
// made here at all: root in a container without CAP_SYS_ADMIN, or without
// access to the loop devices, has the tools but cannot mount.
func (d *disks) probe() error {
	img, dir := filepath.Join(d.dir, ".probe.img"), filepath.Join(d.dir, ".probe")
	_ = os.Remove(img)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	defer os.Remove(dir)
	if err := d.makeDisk(img, 8<<20); err != nil {
		return err
	}
	defer os.Remove(img)
	if err := d.attach(img, dir); err != nil {
		return err
	}
	return detach(dir)
}

// unmountAll unmounts every session disk below sessions/: what a crashed run
// left (from setupDisks), or this Manager's own (from Close).
func (m *Manager) unmountAll() {
	if m.disks == nil || m.disks.off != "" {
		return
	}
	for _, mp := range mountsBelow(m.sessionsDir) {
		if err := detach(mp); err != nil {
			m.log.Warn("could not unmount a session disk", "dir", mp, "err", err)
		}
	}
}

// readNames lists the names in dir.
func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// image is the disk image path of the session directory name.
func (d *disks) image(name string) string { return filepath.Join(d.dir, name+".img") }

// mounted reports whether sessions/<name> has a disk mounted on it.
func (m *Manager) mounted(name string) bool {
	fi, err := m.sessions.Lstat(name)
	return err == nil && fi.IsDir() && devOf(fi) != m.disks.sessionsDev
}

// mountDisk gives the session directory name its own disk, making the image if
// there is none, unless one is mounted already. An existing non-empty directory
// without an image (made before the quota was turned on) keeps its files and
// gets no disk; EnforceDiskQuota still holds it to the limit. Called under m.mu.
func (m *Manager) mountDisk(name string) error {
	d := m.disks
	if d == nil || d.off != "" || m.mounted(name) {
		return nil
	}
	img := d.image(name)
	dir := filepath.Join(m.sessionsDir, name)
	fresh := false
	if _, err := os.Lstat(img); errors.Is(err, fs.ErrNotExist) {
		if empty, err := emptyDir(m.sessions, name); err != nil {
			return err
		} else if !empty {
			m.log.Warn("session directory holds files from before the disk quota; it gets no disk of its own", "session", name)
			return nil
		}
		if err := d.makeDisk(img, d.size); err != nil {
			return err
		}
		fresh = true
	} else if err != nil {
		return err
	}
	if err := d.attach(img, dir); err != nil {
		if fresh {
			_ = os.Remove(img)
		}
		return fmt.Errorf("mount session disk: %w", err)
	}
	if !m.mounted(name) {
		// Mounted on something else than the directory checked (it was swapped).
		return errors.Join(errors.New("mount session disk: directory changed while it was mounted"), detach(dir))
	}
	if fresh {
		_ = m.sessions.Remove(name + "/lost+found")
		// The disk's root is the session directory now: give it DirMode.
		if err := chmodDir(m.sessions, name, m.opts.DirMode); err != nil {
			return errors.Join(fmt.Errorf("mount session disk: %w", err), detach(dir))
		}
	}
	return nil
}

// unmountDisk unmounts the disk of sessions/<name>, if it has one, before the
// directory is renamed (a mount point cannot be). Called under m.mu.
func (m *Manager) unmountDisk(name string) error {
	if m.disks == nil || m.disks.off != "" || !m.mounted(name) {
		return nil
	}
	return detach(filepath.Join(m.sessionsDir, name))
}

// removeImage deletes the disk image of name; a loop device still in use keeps
// its blocks until it is let go.
func (m *Manager) removeImage(name string) error {
	if m.disks == nil || m.disks.off != "" {
		return nil
	}
	if err := os.Remove(m.disks.image(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove session disk: %w", err)
	}
	return nil
}

// moveDisk gives the mounted disk of the warm directory from to the new
// directory to (which must exist, empty): a mount point cannot be renamed, so
// the disk is bind-mounted on to and unmounted from from. A kernel already
// working in from keeps working on the same disk. Called under m.mu.
func (m *Manager) moveDisk(from, to string) error {
	src, dst := filepath.Join(m.sessionsDir, from), filepath.Join(m.sessionsDir, to)
	oldImg, newImg := m.disks.image(from), m.disks.image(to)
	if err := os.Rename(oldImg, newImg); err != nil {
		return fmt.Errorf("rename session disk: %w", err)
	}
	if err := bindMount(src, dst); err != nil {
		return errors.Join(err, os.Rename(newImg, oldImg))
	}
	if err := detach(src); err != nil {
		return errors.Join(err, detach(dst), os.Rename(newImg, oldImg))
	}
	_ = m.sessions.Remove(from)
	return nil
}

// emptyDir reports whether the directory name in root has no entries.
func emptyDir(root *os.Root, name string) (bool, error) {
	f, err := root.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if err == io.EOF {
		return true, nil
	}
	return false, err
}

// EnforceDiskQuota holds a session that has no disk of its own to
// Options.DiskQuota: it adds up the space the files in the session directory
// take (allocated blocks, so a preallocated or sparse file counts as what it
// holds on disk) and, when that is over the limit, deletes the most recently
// modified files until it is not, which removes what the last call wrote first.
// It then returns an error matching ErrDiskQuota naming what it deleted. A
// session with a disk of its own, or without a quota, returns nil at once: its
// file system already refuses the excess.
//
// The executor runs it after each call, so between two checks a call may write
// past the limit for as long as it runs; this is the fallback for running
// without root (see DiskQuota).
func (s *Session) EnforceDiskQuota() error {
	d := s.m.disks
	if d == nil {
		return nil
	}
	if s.root == nil {
		return fmt.Errorf("disk quota: %w", ErrClosed)
	}
	if d.off == "" {
		if fi, err := s.root.Stat("."); err == nil && devOf(fi) != d.sessionsDev {
			return nil
		}
	}
	type file struct {
		name  string
		size  int64
		mtime int64
	}
	var files []file
	var used int64
	_ = fs.WalkDir(s.root.FS(), ".", func(name string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return nil
		}
		n := allocated(fi)
		used += n
		if e.Type().IsRegular() {
			files = append(files, file{name, n, fi.ModTime().UnixNano()})
		}
		return nil
	})
	if used <= d.size {
		return nil
	}
	slices.SortFunc(files, func(a, b file) int { return cmp.Compare(b.mtime, a.mtime) })
	before := used
	var removed []string
	for _, f := range files {
		if used <= d.size {
			break
		}
		if err := s.root.Remove(f.name); err != nil {
			continue
		}
		used -= f.size
		removed = append(removed, f.name)
	}
	s.log.Warn("session over its disk quota: deleted its newest files", "used", before, "limit", d.size, "deleted", len(removed))
	shown := removed
	if len(shown) > 5 {
		shown = append(slices.Clip(shown[:5]), fmt.Sprintf("and %d more", len(removed)-5))
	}
	return fmt.Errorf("session directory held %d bytes, over its %d-byte disk quota; deleted the %d newest files (%s), %d bytes left: %w",
		before, d.size, len(removed), strings.Join(shown, ", "), used, ErrDiskQuota)
}

// devOf returns the device number of the file system holding fi.
func devOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev)
	}
	return 0
}

// allocated is the space fi takes on disk.
func allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
