package keep

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrInUse is returned (wrapped) by Lock when another open file description
// holds the lock: another kernelbox process on the same host (or another
// container with the same volume), or another backend of this process.
var ErrInUse = errors.New("state file in use by a running kernelbox")

// Lock takes the lock of the state file at path (path+".lock", flock), which a
// backend holds until it ends; the kernel drops it with the process, however the
// process ends. No path takes no lock and returns nil.
func Lock(path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrInUse, path)
		}
		return nil, fmt.Errorf("lock state file: %w", err)
	}
	return f, nil
}

// Unlock lets go of a lock Lock took (nil: none), once the backend has written
// its last list.
func Unlock(f *os.File) {
	if f != nil {
		_ = f.Close()
	}
}
