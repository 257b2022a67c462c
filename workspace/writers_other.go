//go:build !linux

package workspace

// fileID is a file's device and inode.
type fileID struct{ dev, ino uint64 }

// openForWriting finds no writers where there is no /proc to look in; Collect
// still marks a file that changed while it was copied as partial.
func openForWriting(files map[fileID]bool, names map[string]bool, owners map[uint32]bool) map[fileID]bool {
	return nil
}
