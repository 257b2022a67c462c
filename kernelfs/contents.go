package kernelfs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/kernelbox/kernelbox/jupyter"
)

// contentsState says whether a placement may upload through the Contents API.
type contentsState int8

const (
	contentsUnknown contentsState = iota
	contentsUsable
	contentsUnusable
)

// contentsChunk is the payload of one Contents API request. Jupyter Server buffers
// and parses each request body whole, which blocks its event loop meanwhile; 4 MiB
// keeps that short, and measured as fast as larger pieces.
const contentsChunk = 4 << 20

// useContents reports whether lf goes through the Contents API, probing the server
// the first time.
func (s *Syncer) useContents(ctx context.Context, conn *jupyter.Conn, lf localFile) bool {
	if s.o.Uploader == nil {
		return false
	}
	if s.contents == contentsUnknown {
		s.contents = contentsUnusable
		if err := s.probeContents(ctx, conn); err != nil {
			s.log.Info("not uploading through the Contents API; files go through the kernel", "why", err)
		} else {
			s.contents = contentsUsable
		}
	}
	return s.contents == contentsUsable
}

// contentsPath maps a path below the session directory to a Contents API path.
// Jupyter Server starts a kernel in <root>/<KernelPath>, so a session directory
// below the kernel's starting directory has a Contents path; others have none.
func (s *Syncer) contentsPath(rel string) (string, error) {
	cwd0, dir := s.cwd0, s.dir
	if cwd0 == "" || dir != cwd0 && !strings.HasPrefix(dir, strings.TrimSuffix(cwd0, "/")+"/") {
		return "", fmt.Errorf("the session directory %s is not below the kernel's starting directory %s", dir, cwd0)
	}
	below := strings.TrimPrefix(strings.TrimPrefix(dir, cwd0), "/")
	return path.Join(s.o.KernelPath, below, rel), nil
}

// probeContents uploads a small random file through the Contents API and asks the
// kernel for its checksum: only a match proves the server writes where the kernel
// reads (a server whose kernels run elsewhere, or a gateway without the API, fails).
func (s *Syncer) probeContents(ctx context.Context, conn *jupyter.Conn) error {
	var rnd [32]byte
	_, _ = rand.Read(rnd[:])
	rel := "inputs/" + uploadPrefix + "probe-" + hex.EncodeToString(rnd[:8])
	cp, err := s.contentsPath(rel)
	if err != nil {
		return err
	}
	if err := s.o.Uploader.SaveFile(ctx, cp, rnd[:], 0); err != nil {
		return err
	}
	defer func() {
		_ = s.k.Remove(ctx, conn, rel)
	}()
	sums, err := s.k.Sums(ctx, conn, []string{rel}, 0)
	if err != nil {
		return err
	}
	want := sha256.Sum256(rnd[:])
	if s := sums[rel]; s == nil || *s != hex.EncodeToString(want[:]) {
		return fmt.Errorf("the kernel does not see the file the server wrote at %s", cp)
	}
	return nil
}

// uploadPrefix names Contents API uploads in progress (not hidden: the API refuses
// hidden names). The kernel side removes leftovers when it sets a session up.
const uploadPrefix = "kb-upload-"

// pushContents uploads a file through the Contents API to a temporary name in
// inputs/, then has the kernel verify its checksum and move it into place.
func (s *Syncer) pushContents(ctx context.Context, conn *jupyter.Conn, f *os.File, lf localFile) (Written, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := "inputs/" + uploadPrefix + hex.EncodeToString(rnd[:])
	cp, err := s.contentsPath(tmp)
	if err != nil {
		return Written{}, err
	}
	buf := make([]byte, min(int64(contentsChunk), max(lf.size, 1)))
	for i, off := 1, int64(0); ; i++ {
		n, err := io.ReadFull(f, buf)
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			return Written{}, err
		}
		off += int64(n)
		chunk := i
		switch {
		case off >= lf.size && i == 1:
			chunk = 0 // the whole file in one request: a plain save
		case off >= lf.size:
			chunk = -1
		}
		if err := s.o.Uploader.SaveFile(ctx, cp, buf[:n], chunk); err != nil {
			_ = s.k.Remove(ctx, conn, tmp)
			return Written{}, err
		}
		if off >= lf.size {
			break
		}
	}
	return s.k.Commit(ctx, conn, tmp, lf.request())
}
