package diskimage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// toolTimeout bounds mkfs.ext4 and mount(8).
const toolTimeout = 30 * time.Second

// mountFlags are the flags of every image mount.
const mountFlags = unix.MS_NOSUID | unix.MS_NODEV

// tools finds mkfs.ext4 and mount(8), or says why images cannot be made here.
func tools() (mkfs, mount string, err error) {
	if os.Geteuid() != 0 {
		return "", "", errors.New("not running as root (loop mounts need CAP_SYS_ADMIN)")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return "", "", fmt.Errorf("no loop devices: %w", err)
	}
	if mkfs, err = findTool("mkfs.ext4"); err != nil {
		return "", "", err
	}
	if mount, err = findTool("mount"); err != nil {
		return "", "", err
	}
	return mkfs, mount, nil
}

// findTool looks name up in PATH and in the sbin directories a service's PATH
// often lacks.
func findTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// makeImage creates the image img of size bytes with an empty ext4 file system.
func (s *Set) makeImage(img string, size int64) error {
	f, err := os.OpenFile(img, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = run(s.mkfs, "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "root_owner=0:0", img)
	}
	if err != nil {
		_ = os.Remove(img)
		return err
	}
	return nil
}

// attach mounts the image img on dir, through the loop device that holds it
// already if there is one (see Mount).
func (s *Set) attach(img, dir string) error {
	if dev, ok := LoopOf(img); ok {
		if err := unix.Mount(dev, dir, "ext4", mountFlags, "discard"); err != nil {
			return fmt.Errorf("mount %s on %s: %w", dev, dir, err)
		}
		return nil
	}
	return run(s.mount, "-t", "ext4", "-o", "loop,nosuid,nodev,discard", img, dir)
}

// run runs a tool and returns its output in the error when it fails.
func run(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(name), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// LoopOf returns the loop device whose backing file is img (same device and
// inode), if one is set up.
func LoopOf(img string) (string, bool) {
	var st unix.Stat_t
	if err := unix.Stat(img, &st); err != nil {
		return "", false
	}
	devs, _ := filepath.Glob("/dev/loop[0-9]*")
	for _, dev := range devs {
		fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		info, err := unix.IoctlLoopGetStatus64(fd)
		unix.Close(fd)
		if err == nil && info.Device == uint64(st.Dev) && info.Inode == st.Ino {
			return dev, true
		}
	}
	return "", false
}

// Unmount unmounts dir lazily: a process still working in it keeps its files,
// and its image's loop device, until it lets go. A dir with nothing mounted on
// it is not an error.
func Unmount(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// BindMount mounts the directory src on dst too; the mount flags of src
// (nosuid, nodev) carry over.
func BindMount(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, dst, err)
	}
	return nil
}

// MountsBelow lists the mount points strictly below dir, deepest first, from
// /proc/self/mountinfo.
func MountsBelow(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	// Longer paths first, so nested mounts go before their parents.
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
