package workspace

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/kernelbox/kernelbox/internal/paths"
)

// Artifacts lists the artifacts of session id, sorted by Name, for list_artifacts.
// A session without artifacts has an empty list. SHA256 is left empty: hashing
// every file on each listing would make listing as slow as the files are big.
// Symlinks and other non-regular files, which this package never creates there,
// are left out, and so are names OpenArtifact would not serve back (temporary
// files, names that are not valid UTF-8): whatever is listed can be opened.
func (m *Manager) Artifacts(id string) ([]Artifact, error) {
	if err := paths.CheckSessionID(id); err != nil {
		return nil, fmt.Errorf("list artifacts: %w", err)
	}
	all, err := m.artifactsRoot()
	if err != nil {
		return nil, fmt.Errorf("list artifacts of %q: %w", id, err)
	}
	root, err := openDir(all, id)
	if errors.Is(err, fs.ErrNotExist) {
		return []Artifact{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list artifacts of %q: %w", id, err)
	}
	defer root.Close()
	arts := []Artifact{}
	err = m.listDir(root, id, "", 0, &arts)
	slices.SortFunc(arts, func(a, b Artifact) int { return cmp.Compare(a.Name, b.Name) })
	if err != nil {
		return arts, fmt.Errorf("list artifacts of %q: %w", id, err)
	}
	return arts, nil
}

// listDir appends the regular files of dir (prefix below the session's artifacts
// directory) to arts.
func (m *Manager) listDir(dir *os.Root, id, prefix string, depth int, arts *[]Artifact) error {
	d, err := dir.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	for {
		entries, rerr := d.ReadDir(256)
		for _, e := range entries {
			if unservable(e.Name()) != "" {
				continue // a temporary file, or a name no client could ask for
			}
			rel := path.Join(prefix, e.Name())
			switch {
			case e.Type().IsDir() && depth < maxDepth:
				sub, err := openDir(dir, e.Name())
				if err != nil {
					continue
				}
				err = m.listDir(sub, id, rel, depth+1, arts)
				sub.Close()
				if err != nil {
					return err
				}
			case e.Type().IsRegular():
				fi, err := e.Info() // an lstat relative to dir's descriptor
				if err != nil || !fi.Mode().IsRegular() {
					continue
				}
				*arts = append(*arts, Artifact{
					Path: filepath.Join(m.artifactsDir, id, filepath.FromSlash(rel)),
					Name: rel,
					Size: fi.Size(),
					MIME: sniffMIME(dir, e.Name(), fi),
				})
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// sniffMIME is detectMIME for a file that is only listed: the content is read only
// when the extension says nothing.
func sniffMIME(dir *os.Root, name string, fi fs.FileInfo) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	f, err := dir.OpenFile(name, openReadFlags, 0)
	if err != nil {
		return "application/octet-stream"
	}
	defer f.Close()
	if ofi, err := f.Stat(); err != nil || !os.SameFile(fi, ofi) {
		return "application/octet-stream"
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	return detectMIME(name, head[:n])
}

// ArtifactPath resolves name, a slash-separated path below session's artifacts
// directory as requested by GET /v1/artifacts/{session}/{path}, to a host path.
// It refuses empty, absolute and non-clean paths and any "." or ".." element
// (ErrInvalidPath), paths that lead through a symlink (ErrInvalidPath), and
// anything that is not an existing regular file (ErrNotFound). Serving code that
// opens the file itself should prefer OpenArtifact, which leaves no gap between
// the check and the open.
func (m *Manager) ArtifactPath(session, name string) (string, error) {
	root, _, err := m.lookupArtifact(session, name)
	if err != nil {
		return "", err
	}
	root.Close()
	return filepath.Join(m.artifactsDir, session, filepath.FromSlash(name)), nil
}

// OpenArtifact opens the artifact that ArtifactPath would resolve, with the same
// checks, and returns it open for reading. The caller closes it.
func (m *Manager) OpenArtifact(session, name string) (*os.File, error) {
	root, fi, err := m.lookupArtifact(session, name)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(name, openReadFlags, 0)
	if err != nil {
		return nil, fmt.Errorf("artifact %q of session %q: %w", name, session, notFoundIfMissing(err))
	}
	ofi, err := f.Stat()
	if err != nil || !ofi.Mode().IsRegular() || !os.SameFile(fi, ofi) {
		f.Close()
		return nil, fmt.Errorf("artifact %q of session %q: changed while being opened: %w", name, session, ErrNotFound)
	}
	return f, nil
}

// lookupArtifact checks session and name and returns a Root on the session's
// artifacts directory and the file's info. It walks name one element at a time
// with Lstat so that no symlink is ever followed.
func (m *Manager) lookupArtifact(session, name string) (*os.Root, fs.FileInfo, error) {
	if err := paths.CheckSessionID(session); err != nil {
		return nil, nil, fmt.Errorf("artifact %q: %w", name, err)
	}
	wrap := func(err error) error {
		return fmt.Errorf("artifact %q of session %q: %w", name, session, err)
	}
	// Temporary names pass here and are not found below, as they are not listed.
	var bad *paths.Error
	if errors.As(paths.CheckPath(name, paths.PathRule{AllowTemp: true}), &bad) {
		return nil, nil, wrap(fmt.Errorf("%w: %s", ErrInvalidPath, bad.Problem))
	}
	all, err := m.artifactsRoot()
	if err != nil {
		return nil, nil, wrap(err)
	}
	if fi, err := all.Lstat(session); err != nil {
		return nil, nil, wrap(notFoundIfMissing(err))
	} else if !fi.IsDir() {
		return nil, nil, wrap(ErrInvalidPath)
	}
	root, err := openDir(all, session)
	if err != nil {
		return nil, nil, wrap(notFoundIfMissing(err))
	}
	parts := strings.Split(name, "/")
	for i, p := range parts {
		if paths.IsTemp(p) {
			root.Close()
			return nil, nil, wrap(ErrNotFound)
		}
		fi, err := root.Lstat(strings.Join(parts[:i+1], "/"))
		switch {
		case err != nil:
			root.Close()
			return nil, nil, wrap(notFoundIfMissing(err))
		case fi.Mode()&fs.ModeSymlink != 0:
			root.Close()
			return nil, nil, wrap(ErrInvalidPath)
		case i < len(parts)-1 && !fi.IsDir(), i == len(parts)-1 && !fi.Mode().IsRegular():
			root.Close()
			return nil, nil, wrap(ErrNotFound)
		case i == len(parts)-1:
			return root, fi, nil
		}
	}
	root.Close()
	return nil, nil, wrap(ErrNotFound)
}

// notFoundIfMissing maps a missing file (or a path through a non-directory) to
// ErrNotFound and keeps other errors.
func notFoundIfMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(bare(err), syscall.ENOTDIR) {
		return ErrNotFound
	}
	return err
}
