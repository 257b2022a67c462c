package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/kernelbox/kernelbox/internal/paths"
)

// Input is one host file to stage into a session's inputs/.
type Input struct {
	// Name is the destination file name in inputs/: a plain name, not a path.
	Name string

	// Source is the canonical host path that was permission-checked. Stage copies
	// the file at exactly this path: it refuses a symlink at any component of it
	// (ErrLinkInPath), and a path inside kernelbox's own directories (ErrPrivate).
	Source string

	// Requested is the path as the user asked for it; errors name it (Source when
	// empty), so a message never reveals more of the host than the user wrote.
	Requested string
}

// label is how errors name the input.
func (in Input) label() string {
	if in.Requested != "" {
		return in.Requested
	}
	return in.Source
}

// Staged describes one staged file.
type Staged struct {
	// Name is the file name in inputs/.
	Name string `json:"name"`

	// Size is the number of bytes copied.
	Size int64 `json:"size"`

	// SHA256 is the hex SHA-256 of the bytes copied; empty unless Options.HashInputs.
	SHA256 string `json:"sha256,omitempty"`

	// Unchanged is set when nothing was copied: the source had not changed since
	// an earlier Stage copied it, and neither had the copy (restage.go).
	Unchanged bool `json:"unchanged,omitempty"`
}

// stageItem is the work on one input during a Stage call.
type stageItem struct {
	in      Input
	src     *os.File
	srcInfo fs.FileInfo // fstat of src
	size    int64       // fstat size, then bytes copied
	keep    bool        // inputs/<name> already holds this version of src
	tmp     string
	sum     string
	backup  string // hard link to what was at inputs/<name>, while committing
	done    bool   // renamed into place
}

// Stage copies each input's Source to inputs/<Name>, all or nothing.
//
// Before anything is copied it checks every input: names must be plain file names
// (ErrInvalidName) and distinct (ErrDuplicateName, naming both requested paths);
// each Source must be a regular file, opened without following a symlink and
// without blocking on a FIFO, and checked with fstat on the open descriptor, so
// the bytes copied are those of the file that was checked (ErrNotRegular says what
// it is instead); no file may be over MaxFileBytes (ErrTooLarge) and the session's
// staged total, counting a restaged name once, may not go over MaxSessionBytes
// (ErrSessionLimit). The limits are enforced again while copying, since a file can
// grow after it was checked.
//
// Each file is copied to a temporary file inside inputs/ and only when every copy
// has succeeded are they renamed over their names. Renaming replaces whatever the
// kernel may have planted at a name, a symlink included, without following it; an
// inputs/ that is not a real directory is replaced by one first. If any step
// fails, the temporary files are removed and files staged earlier are left as they
// were.
func (s *Session) Stage(inputs []Input) ([]Staged, error) {
	if s.root == nil {
		return nil, fmt.Errorf("stage inputs: %w", ErrClosed)
	}
	if len(inputs) == 0 {
		return nil, nil
	}
	start := time.Now()
	items, err := newStageItems(inputs)
	if err != nil {
		return nil, err
	}
	defer closeSources(items)
	if err := s.openSources(items); err != nil {
		return nil, err
	}

	dir, err := ensureDir(s.root, "inputs", s.m.opts.DirMode)
	if err != nil {
		return nil, fmt.Errorf("stage inputs: inputs/: %w", err)
	}
	defer dir.Close()
	if err := s.checkDestinations(dir, items); err != nil {
		return nil, err
	}

	defer removeTemps(dir, items)
	if err := s.copyInputs(dir, items); err != nil {
		return nil, err
	}
	if err := commit(dir, items); err != nil {
		return nil, fmt.Errorf("stage inputs: %w", err)
	}
	return s.record(dir, items, start), nil
}

// newStageItems checks the inputs' names: plain file names, all distinct.
func newStageItems(inputs []Input) ([]*stageItem, error) {
	items := make([]*stageItem, len(inputs))
	byName := make(map[string]*stageItem, len(inputs))
	for i, in := range inputs {
		if err := paths.CheckName(in.Name, paths.Plain); err != nil {
			return nil, fmt.Errorf("stage input %q: %w", in.label(), err)
		}
		if prev, dup := byName[in.Name]; dup {
			return nil, fmt.Errorf("stage inputs: %q and %q would both be inputs/%s: %w",
				prev.in.label(), in.label(), in.Name, ErrDuplicateName)
		}
		items[i] = &stageItem{in: in}
		byName[in.Name] = items[i]
	}
	return items, nil
}

// closeSources closes the source files that were opened.
func closeSources(items []*stageItem) {
	for _, it := range items {
		if it.src != nil {
			it.src.Close()
		}
	}
}

// openSources opens every source (see openSource) and checks the sizes the files
// have now against the per-file and session limits.
func (s *Session) openSources(items []*stageItem) error {
	opts := &s.m.opts
	var incoming int64
	for _, it := range items {
		src, fi, err := s.m.openSource(it.in.Source)
		if err != nil {
			return fmt.Errorf("stage input %q: %w", it.in.label(), err)
		}
		it.src, it.srcInfo, it.size = src, fi, fi.Size()
		if it.size > opts.MaxFileBytes {
			return fmt.Errorf("stage input %q: %d bytes, over the %d-byte per-file limit: %w",
				it.in.label(), it.size, opts.MaxFileBytes, ErrTooLarge)
		}
		incoming += it.size
	}
	return s.checkSessionLimit(items, incoming)
}

// checkDestinations refuses a directory where an input would go, and marks the
// inputs whose destination already holds this version of the source.
func (s *Session) checkDestinations(dir *os.Root, items []*stageItem) error {
	for _, it := range items {
		fi, err := dir.Lstat(it.in.Name)
		if err == nil && fi.IsDir() {
			return fmt.Errorf("stage input %q: destination inputs/%s: %w", it.in.label(), it.in.Name, notRegular(fi.Mode()))
		}
		if err == nil {
			it.sum, it.keep = s.unchangedInput(it, fi)
		}
	}
	return nil
}

// removeTemps removes the temporary copies that were not renamed into place.
func removeTemps(dir *os.Root, items []*stageItem) {
	for _, it := range items {
		if it.tmp != "" {
			_ = dir.Remove(it.tmp)
		}
	}
}

// copyInputs copies each input that changed to a temporary file in dir, then
// checks the session limit again against the bytes actually copied.
func (s *Session) copyInputs(dir *os.Root, items []*stageItem) error {
	var incoming int64
	for _, it := range items {
		if !it.keep {
			if err := s.copyInput(dir, it); err != nil {
				return err
			}
		}
		incoming += it.size
	}
	return s.checkSessionLimit(items, incoming)
}

// record notes the staged files in the session (sizes, and what restage.go needs
// to recognise an unchanged source later) and describes them.
func (s *Session) record(dir *os.Root, items []*stageItem, start time.Time) []Staged {
	out := make([]Staged, len(items))
	for i, it := range items {
		s.staged[it.in.Name] = it.size
		if !it.keep {
			s.remember(dir, it, start)
		}
		out[i] = Staged{Name: it.in.Name, Size: it.size, SHA256: it.sum, Unchanged: it.keep}
		s.log.Debug("staged input", "name", it.in.Name, "bytes", it.size, "unchanged", it.keep)
	}
	return out
}

// checkSessionLimit fails if staging items, incoming bytes in all, would bring
// the session over MaxSessionBytes. Names staged again replace their old size.
func (s *Session) checkSessionLimit(items []*stageItem, incoming int64) error {
	now := s.stagedBytes()
	after := now + incoming
	for _, it := range items {
		after -= s.staged[it.in.Name]
	}
	if limit := s.m.opts.MaxSessionBytes; after > limit {
		return fmt.Errorf("stage inputs: %d more bytes would bring the session's inputs from %d to %d bytes, over the %d-byte session limit: %w",
			after-now, now, after, limit, ErrSessionLimit)
	}
	return nil
}

// openSource opens path for copying: it must lie outside kernelbox's own
// directories (ErrPrivate), be a regular file, and be the file at exactly the
// decided path. Lstat comes first so that a FIFO, device or socket is never opened
// at all; paths.OpenNoFollow opens the file without following a link at any
// component, so whatever directory is swapped with a link meanwhile, the file
// opened is the one at path, and fstat plus SameFile check it is the one Lstat
// saw.
func (m *Manager) openSource(path string) (*os.File, fs.FileInfo, error) {
	if path == "" {
		return nil, nil, errors.New("no source path")
	}
	if err := m.checkPrivate(path); err != nil {
		return nil, nil, err
	}
	lfi, err := os.Lstat(path)
	if err != nil {
		return nil, nil, bare(err)
	}
	if !lfi.Mode().IsRegular() {
		return nil, nil, notRegular(lfi.Mode())
	}
	f, err := paths.OpenNoFollow(path)
	if err != nil {
		return nil, nil, bare(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, bare(err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, notRegular(fi.Mode())
	}
	if !os.SameFile(lfi, fi) {
		f.Close()
		return nil, nil, errors.New("file was replaced while it was being opened")
	}
	return f, fi, nil
}

// bare drops the *fs.PathError around err: messages name the requested path, not
// the canonical one the error carries. errors.Is(err, fs.ErrNotExist) still holds.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// copyInput copies it.src to a new temporary file in dir.
func (s *Session) copyInput(dir *os.Root, it *stageItem) error {
	opts := &s.m.opts
	f, tmp, err := createTemp(dir, "", opts.FileMode)
	if err != nil {
		return fmt.Errorf("stage input %q: %w", it.in.label(), err)
	}
	it.tmp = tmp
	c, err := copyFile(f, it.src, opts.MaxFileBytes, it.size, opts.HashInputs)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, errOverLimit) {
		return fmt.Errorf("stage input %q: grew past the %d-byte per-file limit while being copied: %w",
			it.in.label(), opts.MaxFileBytes, ErrTooLarge)
	}
	if err != nil {
		return fmt.Errorf("stage input %q: copy: %w", it.in.label(), err)
	}
	it.size, it.sum = c.n, c.sum
	return nil
}

// commit renames every temporary file over its name. Before each rename it keeps a
// hard link to whatever was at the name (and removes the name), so that if a later rename fails (the
// kernel raced a directory into place, say) the earlier ones are undone and the
// call leaves inputs/ as it found it. The links are removed afterwards.
func commit(dir *os.Root, items []*stageItem) error {
	var err error
	for _, it := range items {
		if it.keep {
			continue
		}
		if _, lerr := dir.Lstat(it.in.Name); lerr == nil {
			backup := tempPrefix + randomSuffix()
			// Best effort: without the link a rollback cannot restore this name.
			if dir.Link(it.in.Name, backup) == nil {
				it.backup = backup
				// ext4 (auto_da_alloc) writes a file out synchronously when it is
				// renamed over another: a call restaging 100 MiB took 79 ms instead of 33.
				// With the backup link in place the name can go first; what the
				// kernel might put there meanwhile the rename replaces anyway.
				_ = dir.Remove(it.in.Name)
			}
		}
		if err = dir.Rename(it.tmp, it.in.Name); err != nil {
			err = fmt.Errorf("inputs/%s: %w", it.in.Name, err)
			break
		}
		it.tmp, it.done = "", true
	}
	if err != nil {
		for i := len(items) - 1; i >= 0; i-- {
			// The item that failed may have had its name removed already.
			switch it := items[i]; {
			case it.backup != "":
				err = errors.Join(err, dir.Rename(it.backup, it.in.Name))
				it.backup = ""
			case it.done:
				err = errors.Join(err, dir.Remove(it.in.Name))
			}
		}
	}
	for _, it := range items {
		if it.backup != "" {
			_ = dir.Remove(it.backup)
		}
	}
	return err
}
