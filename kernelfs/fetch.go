package kernelfs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"syscall"
)

// hostSum returns the SHA-256 of outputs/rel on the host, or "".
func (pl *puller) hostSum(rel string) string {
	f, err := pl.root.OpenFile("outputs/"+rel, openReadFlags, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fetch copies files from the kernel: small ones several per request, large ones
// in chunks.
func (pl *puller) fetch(ctx context.Context, files []FileEntry) {
	budget := int64(pl.s.o.PullChunkBytes)
	var batch []string
	var size int64
	flush := func() {
		if len(batch) > 0 {
			pl.fetchMany(ctx, batch)
		}
		batch, size = nil, 0
	}
	for _, f := range files {
		if f.Stat.Size() > budget/4 {
			pl.fetchLarge(ctx, f.Rel)
			continue
		}
		if size+f.Stat.Size() > budget {
			flush()
		}
		batch = append(batch, f.Rel)
		size += f.Stat.Size()
	}
	flush()
}

// fetchMany copies several small files, read whole in one request.
func (pl *puller) fetchMany(ctx context.Context, rels []string) {
	s := pl.s
	paths := make([]string, len(rels))
	want := make(map[string]bool, len(rels))
	for i, rel := range rels {
		paths[i] = "outputs/" + rel
		want[paths[i]] = true
	}
	files, err := s.k.ReadMany(ctx, pl.conn, paths, s.o.PullChunkBytes)
	if err != nil {
		pl.note(fmt.Errorf("pull outputs: %w", err), true)
		return
	}
	for _, f := range files {
		if !want[f.Rel] {
			pl.note(fmt.Errorf("pull outputs: the kernel answered for %q, which was not asked for", f.Rel), true)
			continue
		}
		delete(want, f.Rel)
		rel := strings.TrimPrefix(f.Rel, "outputs/")
		switch {
		case f.Err != "":
			s.log.Debug("remote output vanished or unreadable", "name", rel, "err", f.Err)
			pl.incomplete = true
		case f.Big:
			pl.fetchLarge(ctx, rel)
		default:
			pl.keepSmall(rel, f)
		}
	}
	if len(want) > 0 {
		pl.incomplete = true
	}
}

// keepSmall checks and writes one file of a ReadMany answer.
func (pl *puller) keepSmall(rel string, f ReadFile) {
	s := pl.s
	data, err := base64.StdEncoding.DecodeString(f.Data)
	if err != nil {
		pl.note(fmt.Errorf("pull outputs/%s: %w", rel, err), true)
		return
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != f.SHA || int64(len(data)) > s.o.MaxFileBytes {
		pl.note(fmt.Errorf("pull outputs/%s: checksum mismatch: received sha256 %s, the kernel read %s", rel, got, f.SHA), true)
		return
	}
	if err := pl.writeHost(rel, func(w *os.File) error { _, err := w.Write(data); return err }); err != nil {
		pl.note(fmt.Errorf("pull outputs/%s: %w", rel, err), true)
		return
	}
	if f.Changed {
		pl.incomplete = true // it was being written: fetch it again next time
		return
	}
	s.seen[rel] = seenFile{stat: f.Stat, sha: f.SHA}
}

// fetchLarge copies one file in chunks, Window of them in flight, written at their
// offsets into a host temporary file that is hashed before it is renamed into place.
func (pl *puller) fetchLarge(ctx context.Context, rel string) {
	s := pl.s
	op, err := s.k.OpenRead(ctx, pl.conn, "outputs/"+rel)
	if err != nil {
		s.log.Debug("remote output vanished or unreadable", "name", rel, "err", err)
		pl.incomplete = true
		return
	}
	if op.Stat.Size() > s.o.MaxFileBytes {
		pl.abort(ctx, op.H)
		pl.skipBig(rel, op.Stat)
		return
	}
	var end ReadEnd
	var sum string
	err = pl.writeHost(rel, func(w *os.File) error {
		if err := pl.readChunks(ctx, op, w); err != nil {
			pl.abort(ctx, op.H)
			return err
		}
		var err error
		if end, err = s.k.EndRead(ctx, pl.conn, op.H, op.Stat.Size()); err != nil {
			return err
		}
		if sum, err = fileSum(w); err != nil {
			return err
		}
		if sum != end.SHA {
			return fmt.Errorf("checksum mismatch: received sha256 %s, the kernel read %s", sum, end.SHA)
		}
		return nil
	})
	if err != nil {
		pl.note(fmt.Errorf("pull outputs/%s: %w", rel, err), true)
		return
	}
	if end.Changed {
		pl.incomplete = true
		return
	}
	s.seen[rel] = seenFile{stat: op.Stat, sha: sum}
}

// readChunks reads an opened file's bytes into w at their offsets, Window chunks in
// flight.
func (pl *puller) readChunks(ctx context.Context, op Opened, w *os.File) error {
	s, size := pl.s, op.Stat.Size()
	chunk := int64(s.o.PullChunkBytes)
	n := int((size + chunk - 1) / chunk)
	return s.window(ctx, n, func(ctx context.Context, i int) error {
		off := int64(i) * chunk
		want := min(chunk, size-off)
		data, err := s.k.ReadChunk(ctx, pl.conn, op.H, off, want)
		if err != nil {
			return err
		}
		if int64(len(data)) != want {
			return fmt.Errorf("the file shrank while it was read (got %d bytes at offset %d, want %d)", len(data), off, want)
		}
		_, err = w.WriteAt(data, off)
		return err
	})
}

// abort ends a read in the kernel, even when ctx is done.
func (pl *puller) abort(ctx context.Context, h Handle) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pl.s.o.AbortTimeout)
	defer cancel()
	_ = pl.s.k.Abort(actx, pl.conn, h)
}

// fileSum hashes f from its start.
func fileSum(f *os.File) (string, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeHost writes outputs/rel on the host: fill writes a temporary file in the
// session directory, which is then renamed into place. Everything goes through the
// session directory's os.Root, so no name can lead outside it.
func (pl *puller) writeHost(rel string, fill func(*os.File) error) error {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := pullTempPrefix + hex.EncodeToString(rnd[:])
	f, err := pl.root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	err = fill(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		dst := "outputs/" + rel
		if err = pl.root.MkdirAll(path.Dir(dst), 0o755); err == nil {
			err = pl.root.Rename(tmp, dst)
		}
	}
	if err != nil {
		_ = pl.root.Remove(tmp)
	}
	return err
}
