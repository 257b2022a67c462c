package docker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// The kernel's proxy port without a forwarder (issue 53). On runc a container's
// processes are host processes in namespaces of their own, so kernelbox, when it
// may enter a network namespace (root, CAP_SYS_ADMIN over the container's
// namespace), makes the session's listener on 127.0.0.1:egressPort itself inside
// the container's network namespace and serves the proxy from it: the kernel's
// connection is accepted by kernelbox directly, with no process, no loopback hop
// and no copy between. The listener's socket belongs to that namespace whichever
// thread accepts later; only its creation runs on a thread moved there. Nothing
// else of kernelbox enters the namespace: the proxy dials upstream from its own.
//
// When the namespace cannot be entered (kernelbox not root, no CAP_SYS_ADMIN, a
// user namespace it has no rights over) the backend falls back to the forwarder
// (egress.go) and logs why once. gVisor keeps its relay: its network stack is in
// the sandbox, not in a namespace of the host's kernel.

// errNoNetns wraps why the container's network namespace could not be entered:
// the caller falls back to the forwarder.
var errNoNetns = errors.New("cannot enter the container's network namespace")

// listenEgressNetns makes the session's proxy listener on the loopback of the
// container whose first process is pid and whose server's socket kernelbox
// pinned with device dev and inode ino, in its network namespace. An error
// wrapping errNoNetns says the forwarder should be used instead; any other is
// the session's open failing.
func (b *Backend) listenEgressNetns(pid int, dev, ino uint64) (net.Listener, error) {
	if b.cfg.egressForwarderOnly {
		return nil, fmt.Errorf("%w: disabled (test hook)", errNoNetns)
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoNetns, err)
	}
	defer ns.Close()
	// The namespace opened is the container's only if pid still is its
	// process: its root still holds the server's socket kernelbox pinned.
	// A pid reused by then (the container gone) names another root.
	if err := sameContainer(pid, dev, ino); err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	return listenInNetns(ns, "127.0.0.1:"+strconv.Itoa(egressPort))
}

// sameContainer checks that the server's socket in /proc/<pid>/root is still
// the one kernelbox pinned (device dev, inode ino), i.e. that pid is still the
// container's.
func sameContainer(pid int, dev, ino uint64) error {
	if dev == 0 && ino == 0 {
		return errors.New("no pinned server socket to check the container's pid by")
	}
	var st unix.Stat_t
	path := "/proc/" + strconv.Itoa(pid) + "/root" + containerSocket
	if err := unix.Stat(path, &st); err != nil {
		return fmt.Errorf("the container's process %d is gone: %w", pid, err)
	}
	if uint64(st.Dev) != dev || st.Ino != ino { //nolint:unconvert // Dev is not uint64 on every platform
		return fmt.Errorf("process %d is no longer the container's", pid)
	}
	return nil
}

// listenInNetns listens on TCP address addr inside the network namespace ns.
// The socket is made on a thread locked to a goroutine of its own, moved into
// ns and back; if it cannot go back, the thread stays locked so that the
// runtime ends it with the goroutine instead of running anything else in the
// container's namespace.
func listenInNetns(ns *os.File, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("%w: %w", errNoNetns, err)}
			return
		}
		defer self.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread() // still in its own namespace
			done <- result{err: fmt.Errorf("%w: setns: %w", errNoNetns, err)}
			return
		}
		ln, lerr := net.Listen("tcp4", addr)
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// Left locked: the thread dies with this goroutine.
			if ln != nil {
				ln.Close()
			}
			done <- result{err: fmt.Errorf("egress: leave the container's network namespace: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		if lerr != nil {
			lerr = fmt.Errorf("egress: listen on the container's %s: %w", addr, lerr)
		}
		done <- result{ln, lerr}
	}()
	r := <-done
	return r.ln, r.err
}
