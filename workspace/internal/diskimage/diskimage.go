// Package diskimage makes, mounts, unmounts and deletes disk images: sparse
// files of one size in one directory, each holding an ext4 file system (no
// journal, no reserved blocks) that is loop-mounted nosuid,nodev,discard on a
// directory. Whatever is written in the mounted directory past the image's size
// fails with ENOSPC; the host loses at most the image's size, and discard gives
// deleted files' blocks back to it (hole punching through the loop device).
//
// It knows nothing of what the disks are for: workspace gives each session one
// (Options.DiskQuota) and decides when to mount and unmount. Start reading at
// [New] and [Set]. Images need Linux loop devices, mkfs.ext4 and mount(8), and
// root (CAP_SYS_ADMIN); New says why when they cannot be made.
package diskimage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Set is the directory of images of one size. Its methods do not lock: the
// caller serializes those on one name (workspace does so under its lock).
type Set struct {
	dir   string
	size  int64
	mkfs  string
	mount string
}

// ext is the suffix of every image's file name.
const ext = ".img"

// New returns the Set of size-byte images in dir, which it makes (mode 0700)
// when missing. It fails, saying why, when images cannot be made or mounted
// here: not root, no loop devices, mkfs.ext4 or mount(8) missing, or a probe
// image that does not mount (root in a container without CAP_SYS_ADMIN, or
// without access to the loop devices, has the tools but cannot mount).
func New(dir string, size int64) (*Set, error) {
	mkfs, mount, err := tools()
	if err != nil {
		return nil, err
	}
	if err := mkdir0700(dir); err != nil {
		return nil, err
	}
	s := &Set{dir: dir, size: size, mkfs: mkfs, mount: mount}
	if err := s.probe(); err != nil {
		return nil, err
	}
	return s, nil
}

// mkdir0700 makes dir with mode 0700, or gives an existing one that mode.
func mkdir0700(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		return os.Chmod(dir, 0o700)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: errors.New("not a directory")}
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// probe makes and mounts a small image, to learn whether images can be
// mounted here at all.
func (s *Set) probe() error {
	img, dir := filepath.Join(s.dir, ".probe"+ext), filepath.Join(s.dir, ".probe")
	_ = os.Remove(img)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	defer os.Remove(dir)
	if err := s.makeImage(img, 8<<20); err != nil {
		return fmt.Errorf("make a probe image: %w", err)
	}
	defer os.Remove(img)
	if err := s.attach(img, dir); err != nil {
		return fmt.Errorf("mount a probe image: %w", err)
	}
	return Unmount(dir)
}

// Dir returns the directory holding the images.
func (s *Set) Dir() string { return s.dir }

// Size returns the size of each image, in bytes.
func (s *Set) Size() int64 { return s.size }

// Path returns the file of the image name.
func (s *Set) Path(name string) string { return filepath.Join(s.dir, name+ext) }

// Names lists the images in the directory, by name.
func (s *Set) Names() ([]string, error) {
	f, err := os.Open(s.dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	files, err := f.Readdirnames(-1)
	var names []string
	for _, n := range files {
		if name, ok := strings.CutSuffix(n, ext); ok && name != ".probe" {
			names = append(names, name)
		}
	}
	return names, err
}

// Stat returns the image file's info (fs.ErrNotExist when there is none).
func (s *Set) Stat(name string) (fs.FileInfo, error) { return os.Lstat(s.Path(name)) }

// Make creates the image name with an empty file system; it fails when the
// image exists.
func (s *Set) Make(name string) error { return s.makeImage(s.Path(name), s.size) }

// Mount mounts the image name on the directory dir. When a loop device still
// holds the image (a mount detached while a process kept using it), that
// device is mounted again rather than a second one set up on the same file,
// which would put two writers on one ext4.
func (s *Set) Mount(name, dir string) error { return s.attach(s.Path(name), dir) }

// Remove deletes the image name; a missing one is not an error. A loop device
// still in use keeps its blocks until it is let go.
func (s *Set) Remove(name string) error {
	if err := os.Remove(s.Path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Rename gives the image from the name to (a mounted one stays mounted).
func (s *Set) Rename(from, to string) error {
	return os.Rename(s.Path(from), s.Path(to))
}
