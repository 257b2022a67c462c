package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"net/http"
	"path"

	"github.com/kernelbox/kernelbox/internal/paths"
)

// SaveDisplay writes rich display output (an image/png, image/svg+xml or text/html
// from a cell's display data, say) to <artifacts>/<id>/display/<name>, atomically,
// and returns it as an artifact. name must be a plain file name (ErrInvalidName)
// and the caller keeps names unique; an existing artifact of that name is
// replaced. mimeType may be empty, in which case it is guessed like Collect does.
// Data over MaxArtifactBytes is refused with ErrTooLarge.
//
// An output file written to outputs/display/<name> would be collected to the same
// place; the later of the two wins.
func (s *Session) SaveDisplay(name string, data []byte, mimeType string) (Artifact, error) {
	if err := paths.CheckName(name, paths.Plain); err != nil {
		return Artifact{}, fmt.Errorf("save display: %w", err)
	}
	if limit := s.m.opts.MaxArtifactBytes; int64(len(data)) > limit {
		return Artifact{}, fmt.Errorf("save display %q: %d bytes, over the %d-byte artifact limit: %w", name, len(data), limit, ErrTooLarge)
	}
	art, err := s.artifactsRoot()
	if err != nil {
		return Artifact{}, fmt.Errorf("save display %q: %w", name, err)
	}
	const dir = "display"
	rel := dir + "/" + name
	if err := mkdirs(art, dir, s.m.opts.DirMode); err != nil {
		return Artifact{}, fmt.Errorf("save display %q: %w", name, err)
	}
	need := int64(len(data)) - replacedSize(art, rel)
	if err := s.m.reserve(s.id, need); err != nil {
		return Artifact{}, fmt.Errorf("save display %q: %w", name, err)
	}
	f, tmp, err := createTemp(art, dir, s.m.opts.FileMode)
	if err != nil {
		s.m.release(s.id, need)
		return Artifact{}, fmt.Errorf("save display %q: %w", name, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = art.Rename(tmp, rel)
	}
	if err != nil {
		_ = art.Remove(tmp)
		s.m.release(s.id, need)
		return Artifact{}, fmt.Errorf("save display %q: %w", name, err)
	}
	sum := sha256.Sum256(data)
	if mimeType == "" {
		mimeType = detectMIME(name, data[:min(len(data), 512)])
	}
	return Artifact{
		Path:   s.artifactPath(rel),
		Name:   rel,
		Size:   int64(len(data)),
		SHA256: hex.EncodeToString(sum[:]),
		MIME:   mimeType,
	}, nil
}

// detectMIME guesses a media type from name's extension, else from head (the
// first up to 512 bytes of the content).
func detectMIME(name string, head []byte) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return http.DetectContentType(head)
}
