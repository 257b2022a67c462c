package remote

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
func (p *Placement) useContents(ctx context.Context, conn *jupyter.Conn, lf localFile) bool {
	if p.b.opts.Transfer != TransferContents {
		return false
	}
	if p.sync.contents == contentsUnknown {
		p.sync.contents = contentsUnusable
		if err := p.probeContents(ctx, conn); err != nil {
			p.b.log.Info("not uploading through the Contents API; files go through the kernel", "gateway", p.gw.name, "why", err)
		} else {
			p.sync.contents = contentsUsable
		}
	}
	return p.sync.contents == contentsUsable
}

// contentsPath maps a path below the session directory to a Contents API path.
// Jupyter Server starts a kernel in <root>/<KernelPath>, so a session directory
// below the kernel's starting directory has a Contents path; others have none.
func (p *Placement) contentsPath(rel string) (string, error) {
	cwd0, dir := p.sync.cwd0, p.sync.dir
	if cwd0 == "" || dir != cwd0 && !strings.HasPrefix(dir, strings.TrimSuffix(cwd0, "/")+"/") {
		return "", fmt.Errorf("the session directory %s is not below the kernel's starting directory %s", dir, cwd0)
	}
	below := strings.TrimPrefix(strings.TrimPrefix(dir, cwd0), "/")
	return path.Join(p.b.opts.KernelPath, below, rel), nil
}

// probeContents uploads a small random file through the Contents API and asks the
// kernel for its checksum: only a match proves the server writes where the kernel
// reads (a server whose kernels run elsewhere, or a gateway without the API, fails).
func (p *Placement) probeContents(ctx context.Context, conn *jupyter.Conn) error {
	var rnd [32]byte
	_, _ = rand.Read(rnd[:])
	rel := "inputs/" + uploadPrefix + "probe-" + hex.EncodeToString(rnd[:8])
	cp, err := p.contentsPath(rel)
	if err != nil {
		return err
	}
	if err := p.gw.files.SaveFile(ctx, cp, rnd[:], 0); err != nil {
		return err
	}
	defer func() {
		_ = p.op(ctx, conn, "rm", map[string]any{"rel": rel}, nil, nil)
	}()
	var sums map[string]*string
	if err := p.op(ctx, conn, "sums", map[string]any{"rels": []string{rel}}, nil, &sums); err != nil {
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
func (p *Placement) pushContents(ctx context.Context, conn *jupyter.Conn, f *os.File, lf localFile, ans *writeAnswer) error {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := "inputs/" + uploadPrefix + hex.EncodeToString(rnd[:])
	cp, err := p.contentsPath(tmp)
	if err != nil {
		return err
	}
	buf := make([]byte, min(int64(contentsChunk), max(lf.size, 1)))
	for i, off := 1, int64(0); ; i++ {
		n, err := io.ReadFull(f, buf)
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			return err
		}
		off += int64(n)
		chunk := i
		switch {
		case off >= lf.size && i == 1:
			chunk = 0 // the whole file in one request: a plain save
		case off >= lf.size:
			chunk = -1
		}
		if err := p.gw.files.SaveFile(ctx, cp, buf[:n], chunk); err != nil {
			_ = p.op(ctx, conn, "rm", map[string]any{"rel": tmp}, nil, nil)
			return err
		}
		if off >= lf.size {
			break
		}
	}
	return p.op(ctx, conn, "commit", map[string]any{"src": tmp, "rel": lf.rel, "size": lf.size, "sha": lf.sha, "mode": lf.mode}, nil, ans)
}
