package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/kernelbox/kernelbox/workspace/internal/diskimage"
)

// disks gives sessions the disks that enforce Options.DiskQuota: the images
// are internal/diskimage's; when a session gets one, and what happens to it when
// the session closes or is removed, is decided here. The methods that mount or
// unmount run under Manager.mu.
type disks struct {
	images *diskimage.Set // nil when off
	size   int64
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
	d := &disks{size: m.opts.DiskQuota}
	m.disks = d
	var err error
	if m.opts.DiskQuotaCheckOnly {
		err = errors.New("DiskQuotaCheckOnly is set")
	} else {
		d.images, err = diskimage.New(filepath.Join(m.root, diskImagesDir), d.size)
	}
	if err == nil {
		var fi fs.FileInfo
		if fi, err = os.Stat(m.sessionsDir); err == nil {
			d.sessionsDev = devOf(fi)
		}
	}
	if err != nil {
		d.images, d.off = nil, err.Error()
		m.log.Warn("disk quota is only checked after each call: sessions get no disk of their own", "reason", d.off)
		return
	}
	m.log.Info("disk quota: each session directory is a loop-mounted ext4 of its own", "bytes", d.size, "images", d.images.Dir())
	m.unmountAll()
	ids, _ := d.images.Names()
	for _, id := range ids {
		if _, err := m.sessions.Lstat(id); err == nil && !isWarmID(id) {
			continue // mounted again when the session is opened
		}
		if err := d.images.Remove(id); err != nil {
			m.log.Warn("could not remove a session disk left by an earlier run", "image", id, "err", err)
		}
	}
}

// on reports whether sessions get disks of their own.
func (d *disks) on() bool { return d != nil && d.off == "" }

// unmountAll unmounts every session disk below sessions/: what a crashed run
// left (from setupDisks), or this Manager's own (from Close).
func (m *Manager) unmountAll() {
	if !m.disks.on() {
		return
	}
	for _, mp := range diskimage.MountsBelow(m.sessionsDir) {
		if m.keepsMount(mp) {
			continue
		}
		if err := diskimage.Unmount(mp); err != nil {
			m.log.Warn("could not unmount a session disk", "dir", mp, "err", err)
		}
	}
}

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
	if !d.on() || m.mounted(name) {
		return nil
	}
	dir := filepath.Join(m.sessionsDir, name)
	fresh := false
	if _, err := d.images.Stat(name); errors.Is(err, fs.ErrNotExist) {
		if empty, err := emptyDir(m.sessions, name); err != nil {
			return err
		} else if !empty {
			m.log.Warn("session directory holds files from before the disk quota; it gets no disk of its own", "session", name)
			return nil
		}
		if err := d.images.Make(name); err != nil {
			return fmt.Errorf("make session disk: %w", err)
		}
		fresh = true
	} else if err != nil {
		return err
	}
	if err := d.images.Mount(name, dir); err != nil {
		if fresh {
			_ = d.images.Remove(name)
		}
		return fmt.Errorf("mount session disk: %w", err)
	}
	if !m.mounted(name) {
		// Mounted on something else than the directory checked (it was swapped).
		return errors.Join(errors.New("mount session disk: directory changed while it was mounted"), diskimage.Unmount(dir))
	}
	if fresh {
		_ = m.sessions.Remove(name + "/lost+found") // mkfs.ext4 makes it; the session has no use for it
		// The disk's root is the session directory now: give it DirMode.
		if err := chmodDir(m.sessions, name, m.opts.DirMode); err != nil {
			return errors.Join(fmt.Errorf("mount session disk: %w", err), diskimage.Unmount(dir))
		}
	}
	return nil
}

// unmountDisk unmounts the disk of sessions/<name>, if it has one, before the
// directory is renamed (a mount point cannot be). Called under m.mu.
func (m *Manager) unmountDisk(name string) error {
	if !m.disks.on() || !m.mounted(name) {
		return nil
	}
	return diskimage.Unmount(filepath.Join(m.sessionsDir, name))
}

// removeImage deletes the disk image of name; a loop device still in use keeps
// its blocks until it is let go.
func (m *Manager) removeImage(name string) error {
	if !m.disks.on() {
		return nil
	}
	if err := m.disks.images.Remove(name); err != nil {
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
	images := m.disks.images
	if err := images.Rename(from, to); err != nil {
		return fmt.Errorf("rename session disk: %w", err)
	}
	if err := diskimage.BindMount(src, dst); err != nil {
		return errors.Join(err, images.Rename(to, from))
	}
	if err := diskimage.Unmount(src); err != nil {
		return errors.Join(err, diskimage.Unmount(dst), images.Rename(to, from))
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

// devOf returns the device number of the file system holding fi.
func devOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev)
	}
	return 0
}
