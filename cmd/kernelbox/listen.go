package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The unix socket of `kernelbox serve --listen unix:PATH` (issue 33 item 4). It
// is tokenless, so whoever connects runs code as this user. Two things keep
// every other uid out:
//
//   - It is never reachable by another uid, at any instant: it is bound inside a
//     fresh 0700 directory beside PATH, made 0600 there, and only then renamed
//     to PATH. (Binding at PATH and chmodding after left it open to everyone for
//     a moment under umask 000; changing the umask around bind would change it
//     for every goroutine of the process while it is set.)
//   - Each accepted connection's peer uid (SO_PEERCRED) must be this process's
//     effective uid, or the connection is closed before a byte is read: a socket
//     whose mode was loosened later, or reached through a file descriptor passed
//     on, still serves its own user only. Root is refused too when the server is
//     not root: root can reach the server anyway, but a process that is uid 0
//     without the capabilities that make root (a container's root without a user
//     namespace, cap-drop ALL) cannot, and must not get in through a loosened
//     mode. Root uses `sudo -u USER kernelbox ...`.

// listenUnix listens on a unix socket at path, made as described above, and
// returns the listener and a function that removes the socket, if it is still
// the one this call made. An existing socket at path is replaced (a server that
// died leaves one behind); anything else there is an error.
func listenUnix(path string, log *slog.Logger) (net.Listener, func(), error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() != fs.ModeSocket {
		return nil, nil, fmt.Errorf("--listen unix:%s: there is a %s there, not a socket; remove it or choose another path", path, kindName(fi.Mode()))
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".kernelbox-listen-")
	if err != nil {
		return nil, nil, fmt.Errorf("--listen unix:%s: a private directory beside it: %w", path, err)
	}
	defer os.Remove(dir)
	ln, fi, err := bindPrivate(dir, path)
	if err != nil {
		return nil, nil, fmt.Errorf("--listen unix:%s: %w", path, err)
	}
	remove := func() {
		if now, err := os.Lstat(path); err == nil && os.SameFile(now, fi) {
			_ = os.Remove(path)
		}
	}
	return &peerListener{Listener: ln, uid: uint32(os.Geteuid()), log: log}, remove, nil
}

// bindPrivate binds a socket in the private directory dir, makes it 0600 and
// renames it to path.
func bindPrivate(dir, path string) (net.Listener, os.FileInfo, error) {
	tmp := filepath.Join(dir, "s")
	bind := tmp
	if len(bind) > maxSocketPath {
		// A path too long for sockaddr_un: bind through the directory's file
		// descriptor, as the kernel resolves /proc/self/fd/N to it.
		d, err := os.Open(dir)
		if err != nil {
			return nil, nil, err
		}
		defer d.Close()
		bind = "/proc/self/fd/" + strconv.Itoa(int(d.Fd())) + "/s"
	}
	ln, err := net.Listen("unix", bind)
	if err != nil {
		return nil, nil, err
	}
	// The socket is renamed away from where it was bound: Close must not
	// unlink that name (listenUnix's remove unlinks the socket itself).
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, os.FileInfo, error) {
		_ = ln.Close()
		_ = os.Remove(tmp)
		return nil, nil, err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fail(err)
	}
	fi, err := os.Lstat(tmp)
	if err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	return ln, fi, nil
}

// maxSocketPath is the longest path bind(2) takes (sun_path less its NUL).
const maxSocketPath = 107

// kindName names a file's type for an error.
func kindName(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	default:
		return "special file"
	}
}

// peerListener accepts only connections whose peer has uid; it closes the
// others at once, logging at most one warning per 10 s.
type peerListener struct {
	net.Listener
	uid uint32
	log *slog.Logger

	refused  atomic.Int64
	mu       sync.Mutex
	lastWarn time.Time
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cred, err := peerCred(c)
		if err == nil && cred.Uid == l.uid {
			return c, nil
		}
		_ = c.Close()
		n := l.refused.Add(1)
		l.mu.Lock()
		warn := time.Since(l.lastWarn) > 10*time.Second
		if warn {
			l.lastWarn = time.Now()
		}
		l.mu.Unlock()
		if !warn {
			continue
		}
		if err != nil {
			l.log.Warn("refused a connection on the unix socket: its peer's credentials cannot be read", "err", err, "refused_total", n)
		} else {
			l.log.Warn("refused a connection on the unix socket from another user: it serves only its own uid",
				"peer_uid", cred.Uid, "peer_pid", cred.Pid, "uid", l.uid, "refused_total", n)
		}
	}
}

// peerCred returns the credentials of the process that connected c.
func peerCred(c net.Conn) (*unix.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, errors.New("not a unix socket connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}
