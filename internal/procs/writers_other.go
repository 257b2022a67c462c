//go:build !linux

package procs

// FileID is a file's device and inode.
type FileID struct{ Dev, Ino uint64 }

// OpenForWriting finds no writers where there is no /proc to look in.
func OpenForWriting(files map[FileID]bool, names map[string]bool, owners map[uint32]bool) map[FileID]bool {
	return nil
}
