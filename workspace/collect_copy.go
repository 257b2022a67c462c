package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path"
	"path/filepath"
)

// copyArtifact copies the first size bytes of src to the artifact rel, hashing as
// it goes. If the content hashes to prevSum it discards the copy (the artifact
// already holds it) and returns changed == false.
func (c *collector) copyArtifact(src *os.File, rel string, size int64, prevSum string) (a Artifact, changed bool, err error) {
	s := c.s
	dir, err := c.artifactDir(path.Dir(rel))
	if err != nil {
		return Artifact{}, false, err
	}
	// Counted against the budget before the copy, net of the artifact it
	// replaces (for a moment both exist: one file's worth of overshoot).
	old := replacedSize(dir, path.Base(rel))
	if err := s.m.reserve(s.id, size-old); err != nil {
		return Artifact{}, false, err
	}
	reserved := size - old
	f, tmp, err := createTemp(dir, "", s.m.opts.FileMode)
	if err != nil {
		s.m.release(s.id, reserved)
		return Artifact{}, false, err
	}
	defer func() {
		if tmp != "" {
			_ = dir.Remove(tmp)
			s.m.release(s.id, reserved)
		}
	}()
	// No more than size: a file appended to faster than it is copied would
	// otherwise be chased up to MaxArtifactBytes. Collect marks the short copy
	// partial.
	cp, err := copyFile(f, io.LimitReader(src, size), s.m.opts.MaxArtifactBytes, size, true)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Artifact{}, false, err
	}
	// A file that shrank while it was copied is counted as copied.
	s.m.release(s.id, size-cp.n)
	reserved = cp.n - old
	a = Artifact{
		Path:   s.artifactPath(rel),
		Name:   rel,
		Size:   cp.n,
		SHA256: cp.sum,
		MIME:   detectMIME(rel, cp.head),
	}
	if cp.sum == prevSum {
		return a, false, nil
	}
	if err := dir.Rename(tmp, path.Base(rel)); err != nil {
		return Artifact{}, false, err
	}
	tmp = ""
	s.log.Debug("collected artifact", "name", rel, "bytes", cp.n)
	return a, true, nil
}

// hashFile returns the hex SHA-256 of what is left to read of f, failing with
// errOverLimit past limit bytes. sizeHint sizes the buffer.
func hashFile(f *os.File, limit, sizeHint int64) (string, error) {
	h := sha256.New()
	buf := make([]byte, min(max(sizeHint+1, 4096), 64<<10))
	n, err := io.CopyBuffer(h, onlyReader{&io.LimitedReader{R: f, N: limit + 1}}, buf)
	if err != nil {
		return "", err
	}
	if n > limit {
		return "", errOverLimit
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// artifactDir returns a Root on the directory rel (slash path, "." for the top) of
// the session's artifacts, creating it if needed. The Roots are kept for the rest
// of the Collect, so that files in one directory do not each walk the path again.
func (c *collector) artifactDir(rel string) (*os.Root, error) {
	if r, ok := c.dirs[rel]; ok {
		return r, nil
	}
	art, err := c.s.artifactsRoot()
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return art, nil
	}
	if err := mkdirs(art, rel, c.s.m.opts.DirMode); err != nil {
		return nil, err
	}
	r, err := openDir(art, rel)
	if err != nil {
		return nil, err
	}
	if c.dirs == nil {
		c.dirs = map[string]*os.Root{}
	}
	c.dirs[rel] = r
	return r, nil
}

// artifactPath is the host path of the artifact rel of this session.
func (s *Session) artifactPath(rel string) string {
	return filepath.Join(s.m.artifactsDir, s.id, filepath.FromSlash(rel))
}
