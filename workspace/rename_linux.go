package workspace

import (
	"errors"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames from/name to to/newName, failing with EEXIST rather
// than replacing anything at newName. File systems without RENAME_NOREPLACE get a
// check before the rename (the callers hold the manager's lock, and nothing else
// of kernelbox's writes into the two directories meanwhile).
func renameNoReplace(from int, name string, to int, newName string) error {
	err := unix.Renameat2(from, name, to, newName, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return renameChecked(from, name, to, newName)
	}
	return err
}
