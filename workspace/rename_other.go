//go:build !linux

package workspace

// renameNoReplace renames from/name to to/newName, failing with EEXIST rather
// than replacing anything at newName (checked before the rename: the callers hold
// the manager's lock).
func renameNoReplace(from int, name string, to int, newName string) error {
	return renameChecked(from, name, to, newName)
}
