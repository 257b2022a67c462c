package kernelfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
)

// Get opens the regular file at path in the kernel's session directory and
// returns a reader of its bytes and its size. It fails as
// workspace.Session.Get does (invalid_path for a bad path, a link anywhere on
// it, a FIFO, socket or device; not_found; is_directory; not_directory). The
// reader fetches PullChunkBytes per request, Window requests ahead, and ends with
// an error instead of io.EOF when what arrived is not what the kernel read
// (SHA-256). It reads through the connection lent to f and uses ctx for every
// request: it must be read and closed within the job that opened it.
func (f *Files) Get(ctx context.Context, path string) (io.ReadCloser, int64, error) {
	const op = "get"
	if err := checkPath(op, path, false); err != nil {
		return nil, 0, err
	}
	var b struct {
		refusal
		Opened
	}
	if err := f.s.k.call(ctx, f.conn, "fget", relArgs{Rel: path}, nil, &b); err != nil {
		return nil, 0, fmt.Errorf("%s %q: %w", op, path, err)
	}
	if err := b.err(op, path); err != nil {
		return nil, 0, err
	}
	size := max(b.Stat.Size(), 0)
	return &download{f: f, ctx: ctx, path: path, h: b.H, size: size, sum: sha256.New()}, size, nil
}

// download reads one file from the kernel in chunks. It keeps the context of
// the Get that opened it because an io.Reader's Read takes none; it lives no
// longer than the job that lent the connection.
type download struct {
	f    *Files
	ctx  context.Context
	path string
	h    Handle
	size int64

	off     int64              // bytes asked for so far
	buf     []byte             // received, not yet read
	pending []chan chunkResult // chunks asked for, in order: at most Window
	sum     hash.Hash
	err     error // sticky
	done    bool  // the kernel handle is closed
	fetched int64 // bytes received (or skipped by Seek)
	seeked  bool  // Seek skipped bytes: sum is not the file's
}

type chunkResult struct {
	data []byte
	err  error
}

// fetch asks for the chunks after those pending in the background, until
// Window are in flight or the file is all asked for: the kernel answers one
// request at a time, but the next ones are already on their way to it.
func (d *download) fetch() {
	for len(d.pending) < d.f.s.o.Window && d.off < d.size {
		n := min(int64(d.f.s.o.PullChunkBytes), d.size-d.off)
		off := d.off
		d.off += n
		ch := make(chan chunkResult, 1)
		d.pending = append(d.pending, ch)
		go func() {
			data, err := d.f.s.k.ReadChunk(d.ctx, d.f.conn, d.h, off, n)
			if err == nil && int64(len(data)) != n {
				err = fmt.Errorf("the file changed while it was read (got %d bytes at offset %d, want %d)", len(data), off, n)
			}
			ch <- chunkResult{data, err}
		}()
	}
}

// drain waits for every chunk in flight and forgets them.
func (d *download) drain() {
	for _, ch := range d.pending {
		<-ch
	}
	d.pending = nil
}

func (d *download) Read(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	for len(d.buf) == 0 && d.fetched < d.size {
		d.fetch()
		r := <-d.pending[0]
		d.pending = d.pending[1:]
		if r.err != nil {
			d.err = fmt.Errorf("get %q: %w", d.path, r.err)
			return 0, d.err
		}
		d.buf = r.data
		d.fetched += int64(len(r.data))
		d.sum.Write(r.data)
		d.fetch() // ahead while this one is read
	}
	n := copy(p, d.buf)
	d.buf = d.buf[n:]
	if len(d.buf) == 0 && d.fetched >= d.size {
		// Checked with the last bytes, not on a later Read: a reader limited to
		// the size (io.LimitReader) never makes one.
		if d.err = d.end(); d.err == nil {
			d.err = io.EOF
		}
		if n > 0 && d.err == io.EOF {
			return n, nil
		}
		return n, d.err
	}
	return n, nil
}

// Seek moves to offset from the start (whence must be io.SeekStart), without
// fetching what it skips: a reader that shows a page deep into a large file
// (MCP read_file) does not pull the bytes before it through the kernel. A
// download that was sought is not checked against the kernel's checksum at the
// end (it did not receive every byte); each chunk is still checked for length.
func (d *download) Seek(offset int64, whence int) (int64, error) {
	switch {
	case whence != io.SeekStart:
		return 0, fmt.Errorf("get %q: seek: only from the start", d.path)
	case offset < 0 || offset > d.size:
		return 0, fmt.Errorf("get %q: seek to %d: outside the file's %d bytes", d.path, offset, d.size)
	case d.err != nil:
		return 0, d.err
	}
	d.drain() // the chunks in flight are not needed any more
	d.buf = nil
	d.off, d.fetched = offset, offset
	d.seeked = true
	return offset, nil
}

// end closes the kernel's handle and compares checksums.
func (d *download) end() error {
	d.done = true
	if d.seeked {
		// The kernel would hash the whole file to answer; nothing to compare it with.
		d.f.abort(d.ctx, d.h)
		return nil
	}
	end, err := d.f.s.k.EndRead(d.ctx, d.f.conn, d.h, d.size)
	if err != nil {
		return fmt.Errorf("get %q: %w", d.path, err)
	}
	if got := hex.EncodeToString(d.sum.Sum(nil)); got != end.SHA {
		return fmt.Errorf("get %q: checksum mismatch: received sha256 %s, the kernel read %s", d.path, got, end.SHA)
	}
	return nil
}

// Close waits for the chunks in flight and closes the kernel's handle.
func (d *download) Close() error {
	d.drain()
	if !d.done {
		d.done = true
		d.f.abort(d.ctx, d.h)
	}
	if d.err == nil {
		d.err = errors.New("read after close")
	}
	return nil
}
