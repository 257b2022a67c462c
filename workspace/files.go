package workspace

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/kernelbox/kernelbox/internal/paths"
	"golang.org/x/sys/unix"
)

// The low-level file operations shared by staging, collection and data copies.
// Everything that touches a session directory goes through an *os.Root so that a
// path can never leave the directory, whatever the kernel planted in it; on top
// of that, code that must not follow a link at all Lstats first and checks that
// what it opened is the same file (os.Root follows links that stay inside it).

// tempPrefix starts the names of the temporary files and directories this package
// creates next to their final names. Listings skip names with this prefix.
const tempPrefix = paths.TempPrefix

// openReadFlags opens a file for reading without following a final symlink (where
// the OS is asked directly) and without blocking on a FIFO or a device.
const openReadFlags = paths.ReadFlags

// randomSuffix returns 16 random hex digits for temporary and warm names.
func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24).
	return hex.EncodeToString(b[:])
}

// createTemp creates a new file named tempPrefix+random in dir (relative to root)
// with O_EXCL, so it never opens or follows anything that was already there.
// The caller removes it on failure. mode is applied with fchmod so umask does not
// narrow it.
func createTemp(root *os.Root, dir string, mode fs.FileMode) (*os.File, string, error) {
	for range 5 {
		name := tempPrefix + randomSuffix()
		if dir != "" && dir != "." {
			name = dir + "/" + name
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, mode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		if err := f.Chmod(mode); err != nil {
			f.Close()
			_ = root.Remove(name)
			return nil, "", err
		}
		return f, name, nil
	}
	return nil, "", fmt.Errorf("create temporary file in %q: %w", dir, fs.ErrExist)
}

// copied is the outcome of copyFile.
type copied struct {
	n    int64
	sum  string // hex SHA-256, empty when not hashed
	head []byte // the first up to 512 bytes, only when hashed (for MIME sniffing)
}

// errOverLimit reports that a copy hit its byte limit; callers turn it into a
// message naming the file and the limit.
var errOverLimit = errors.New("over limit")

// copyFile copies src to dst and fails with errOverLimit once more than limit bytes
// have been read, which also catches a file that grows after it was checked.
//
// Without hashing it is a plain io.Copy between two *os.File, which Linux turns
// into copy_file_range. With hashing it reads src once and feeds dst and SHA-256
// from the same buffer, so the digest is of exactly the bytes written: hashing the
// source in a second pass could describe different bytes if the file changed.
// sizeHint (the fstat size) sizes the buffer so small files do not cost 1 MiB each.
func copyFile(dst *os.File, src io.Reader, limit, sizeHint int64, hash bool) (copied, error) {
	lr := &io.LimitedReader{R: src, N: limit + 1}
	if !hash {
		n, err := io.Copy(dst, lr)
		if err != nil {
			return copied{n: n}, err
		}
		if n > limit {
			return copied{n: n}, errOverLimit
		}
		return copied{n: n}, nil
	}
	h := sha256.New()
	head := &headWriter{}
	bufSize := int64(1 << 20)
	if sizeHint >= 0 && sizeHint+1 < bufSize {
		bufSize = max(sizeHint+1, 4096)
	}
	// The wrappers hide ReadFrom/WriteTo so CopyBuffer really uses buf and the
	// MultiWriter; otherwise *os.File's fast paths would bypass the hash.
	n, err := io.CopyBuffer(onlyWriter{io.MultiWriter(dst, h, head)}, onlyReader{lr}, make([]byte, bufSize))
	if err != nil {
		return copied{n: n}, err
	}
	if n > limit {
		return copied{n: n}, errOverLimit
	}
	return copied{n: n, sum: hex.EncodeToString(h.Sum(nil)), head: head.b}, nil
}

type onlyWriter struct{ io.Writer }

type onlyReader struct{ io.Reader }

// headWriter keeps the first 512 bytes written to it (what http.DetectContentType reads).
type headWriter struct{ b []byte }

func (w *headWriter) Write(p []byte) (int, error) {
	if room := 512 - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// ensureDir makes name (relative to root) a real directory and returns a Root on
// it. Whatever else is there — a symlink, a file, a FIFO — is unlinked first
// (unlinking never follows a link) and a fresh directory with mode is made. After
// opening, it checks that the opened directory is still the one at name, so a
// swap between the check and the open is reported rather than written through.
//
// Two Opens of one session may make its inputs/ at the same time: a Mkdir that
// finds the directory made meanwhile looks again.
func ensureDir(root *os.Root, name string, mode fs.FileMode) (*os.Root, error) {
	return ensureDirTry(root, name, mode, true)
}

func ensureDirTry(root *os.Root, name string, mode fs.FileMode, again bool) (*os.Root, error) {
	fi, err := root.Lstat(name)
	switch {
	case err == nil && fi.IsDir():
	case err == nil || errors.Is(err, fs.ErrNotExist):
		if err == nil {
			if err := root.Remove(name); err != nil {
				return nil, fmt.Errorf("replace %s %q with a directory: %w", kindOf(fi.Mode()), name, err)
			}
		}
		if err := root.Mkdir(name, mode); errors.Is(err, fs.ErrExist) && again {
			return ensureDirTry(root, name, mode, false)
		} else if err != nil {
			return nil, err
		}
		if err := chmodDir(root, name, mode); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	sub, err := root.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	if err := sameDir(root, name, sub); err != nil {
		sub.Close()
		return nil, err
	}
	return sub, nil
}

// openDir returns a Root on the existing directory name, refusing a symlink there
// (os.Root alone would follow one that stays inside root).
func openDir(root *os.Root, name string) (*os.Root, error) {
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("is a %s, not a directory", kindOf(fi.Mode()))}
	}
	sub, err := root.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	if err := sameDir(root, name, sub); err != nil {
		sub.Close()
		return nil, err
	}
	return sub, nil
}

// sameDir checks that sub (just opened from root/name) is the directory now at
// name, not something reached through a link swapped in meanwhile.
func sameDir(root *os.Root, name string, sub *os.Root) error {
	opened, err := sub.Stat(".")
	if err != nil {
		return err
	}
	now, err := root.Lstat(name)
	if err != nil {
		return err
	}
	if !now.IsDir() || !os.SameFile(opened, now) {
		return fmt.Errorf("directory %q changed while it was being opened", name)
	}
	return nil
}

// chmodDir sets the mode of directory name through an open descriptor (fchmod),
// so a link swapped in after the check is never chmodded.
func chmodDir(root *os.Root, name string, mode fs.FileMode) error {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	now, err := root.Lstat(name)
	if err != nil {
		return err
	}
	if !now.IsDir() || !os.SameFile(fi, now) {
		return fmt.Errorf("directory %q changed while its mode was being set", name)
	}
	return f.Chmod(mode)
}

// removeTree removes name (one element, relative to root) and everything under
// it, without following a link and holding a bounded number of descriptors
// however deep the tree (removeall.go). Read-only directories (data copies are
// 0555) cannot be emptied by a non-root owner: it gives them write permission.
func removeTree(root *os.Root, name string) error {
	d, err := root.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	// Fd is safe here: a directory is never in the poller.
	dir := int(d.Fd())
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return nil
	} else if err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		err = unix.Unlinkat(dir, name, 0)
	} else {
		err = removeAllAt(dir, name, true)
	}
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	return nil
}

// mkdirs creates the slash-separated directory dir (relative to root) and any
// missing parents with mode. It refuses to pass through anything that is not a
// real directory, a symlink included.
func mkdirs(root *os.Root, dir string, mode fs.FileMode) error {
	if dir == "" || dir == "." {
		return nil
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		fi, err := root.Lstat(p)
		if err == nil {
			if !fi.IsDir() {
				return &fs.PathError{Op: "mkdir", Path: p, Err: fmt.Errorf("is a %s, not a directory", kindOf(fi.Mode()))}
			}
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := root.Mkdir(p, mode); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := chmodDir(root, p, mode); err != nil {
			return err
		}
	}
	return nil
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
