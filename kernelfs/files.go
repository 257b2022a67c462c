package kernelfs

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/paths"
	"github.com/kernelbox/kernelbox/jupyter"
)

// The session files API (upload, download, list, delete) for a session whose
// files live in its kernel: the kernel side is kernelfiles.py, which walks every
// path from a descriptor of the session directory without following a link;
// this side checks paths first with the files API's rule (as the workspace does), streams uploads and
// downloads in chunks (memory bounded by Window chunks, whatever the size) and
// holds the session to a byte budget, since a remote session has no disk quota.

// DefaultMaxSessionBytes is the default of Options.MaxSessionBytes.
const DefaultMaxSessionBytes = int64(10 << 30)

// Limits bound the files API of one session.
type Limits struct {
	// MaxFileBytes caps each upload (api.PutOptions.MaxBytes overrides it
	// per call). Defaults to Options.MaxFileBytes.
	MaxFileBytes int64
	// MaxSessionBytes is the session's byte budget: an upload that would take
	// the regular files of the kernel's session directory over it is refused
	// (api.ErrQuota) and leaves nothing. Defaults to Options.MaxSessionBytes.
	MaxSessionBytes int64
}

// Files is the files API of one session's kernel, through a connection lent for
// the duration of one job of the session's worker: it must not be used after
// that (a download's reader included). Its methods match the workspace's (the
// executor's SessionFiles). Not safe for concurrent use.
type Files struct {
	s    *Syncer
	conn *jupyter.Conn
	l    Limits
}

// Files returns the files API of the session's kernel through conn. The
// session's directory must be set up (PushInputs ran on this kernel process).
func (s *Syncer) Files(conn *jupyter.Conn, l Limits) *Files {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = s.o.MaxFileBytes
	}
	if l.MaxSessionBytes <= 0 {
		l.MaxSessionBytes = s.o.MaxSessionBytes
	}
	return &Files{s: s, conn: conn, l: l}
}

// FileError is a files-API operation refused by the kernel side, or by this
// side for what the kernel reported. It matches (errors.Is) the api sentinel
// of its Code, as the workspace's file errors do, so the front ends classify
// both alike.
type FileError struct {
	Op   string // "put", "get", "list", "remove"
	Path string
	Code string // an api code: "invalid_path", "not_found", "is_directory", ...; "io" for others
	Why  string
}

func (e *FileError) Error() string {
	return fmt.Sprintf("%s %q: %s", e.Op, e.Path, e.Why)
}

// Is matches the sentinels of e's code.
func (e *FileError) Is(target error) bool {
	return slices.Contains(codeErrors[e.Code], target)
}

var codeErrors = map[string][]error{
	string(api.CodeInvalidPath):  {api.ErrInvalidPath},
	string(api.CodeNotFound):     {api.ErrNotFound},
	string(api.CodeIsDirectory):  {api.ErrIsDirectory},
	string(api.CodeNotDirectory): {api.ErrNotDirectory},
	string(api.CodeExists):       {api.ErrExists},
	string(api.CodeTooLarge):     {api.ErrTooLarge},
	string(api.CodeQuota):        {api.ErrQuota},
}

// refusal is the part of a kernel answer that says why an operation failed.
type refusal struct {
	Code string `json:"code"`
	Why  string `json:"why"`
}

func (r refusal) err(op, path string) error {
	if r.Code == "" {
		return nil
	}
	code := r.Code
	if _, ok := codeErrors[code]; !ok {
		code = "io"
	}
	return &FileError{Op: op, Path: path, Code: code, Why: r.Why}
}

// markName is the session marker of kernelsync.py, which no client may touch.
const markName = ".kernelbox-session"

// checkPath applies the files API's path rule (paths.CheckPath's strictest, as
// the workspace does for a local session: the same refusals), plus the session
// marker.
func checkPath(op, p string, allowRoot bool) error {
	var e *paths.Error
	if err := paths.CheckPath(p, paths.PathRule{AllowRoot: allowRoot}); errors.As(err, &e) {
		return &FileError{Op: op, Path: e.Shown(), Code: string(api.CodeInvalidPath), Why: "invalid path: " + e.Problem.String()}
	}
	if first, _, _ := strings.Cut(p, "/"); first == markName {
		return &FileError{Op: op, Path: p, Code: string(api.CodeInvalidPath), Why: "invalid path: names kernelbox's session marker"}
	}
	return nil
}

type relArgs struct {
	Rel       string `json:"rel"`
	NoOver    bool   `json:"noover,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
	Max       int    `json:"max,omitempty"`
}

// Put writes what r yields to path in the kernel's session directory and
// returns the bytes written: parents are made, the bytes go to a temporary file
// beside path, checked (size and SHA-256) and renamed into place, so a link
// planted at path is replaced, never written through. It fails as
// workspace.Session.Put does (invalid_path, not_directory, is_directory,
// exists with NoOverwrite, too_large past the file limit), and with quota when
// the session's files would go over MaxSessionBytes; then nothing is left.
func (f *Files) Put(ctx context.Context, path string, r io.Reader, o api.PutOptions) (int64, error) {
	const op = "put"
	if err := checkPath(op, path, false); err != nil {
		return 0, err
	}
	limit := o.MaxBytes
	if limit <= 0 {
		limit = f.l.MaxFileBytes
	}
	var b struct {
		refusal
		H    Handle `json:"h"`
		Used int64  `json:"used"`
		Old  int64  `json:"old"`
	}
	if err := f.s.k.call(ctx, f.conn, "fput", relArgs{Rel: path, NoOver: o.NoOverwrite}, nil, &b); err != nil {
		return 0, fmt.Errorf("%s %q: %w", op, path, err)
	}
	if err := b.err(op, path); err != nil {
		return 0, err
	}
	room := f.l.MaxSessionBytes - max(b.Used-b.Old, 0)
	n, sum, err := f.send(ctx, b.H, r, min(limit, max(room, 0)))
	if errors.Is(err, errOverLimit) {
		if n > limit {
			err = &FileError{Op: op, Path: path, Code: string(api.CodeTooLarge), Why: fmt.Sprintf("over the %d-byte file limit", limit)}
		} else {
			err = &FileError{Op: op, Path: path, Code: string(api.CodeQuota), Why: fmt.Sprintf(
				"over the session's budget of %d bytes for its files in the remote kernel (%d used; remote sessions have no disk quota of their own, so uploads are held to this budget); nothing was left", f.l.MaxSessionBytes, b.Used)}
		}
	}
	if err == nil {
		var end struct {
			refusal
			Size int64 `json:"size"`
		}
		if err = f.s.k.call(ctx, f.conn, "fputend", struct {
			H    Handle `json:"h"`
			SHA  string `json:"sha"`
			Size int64  `json:"size"`
		}{b.H, sum, n}, nil, &end); err == nil {
			if err = end.err(op, path); err == nil {
				return end.Size, nil
			}
			return 0, err // fputend discarded the temporary file
		}
	}
	f.abort(ctx, b.H)
	var fe *FileError
	if errors.As(err, &fe) || ctx.Err() != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s %q: %w", op, path, err)
}

// errOverLimit: an upload went past what it may write.
var errOverLimit = errors.New("over the limit")

// chunkPool holds upload buffers, so a stream of uploads reuses the same few.
var chunkPool sync.Pool

// send streams r to the upload h, ChunkBytes per request and Window requests in
// flight, and returns the bytes sent and their SHA-256. Past limit bytes it
// stops with errOverLimit (n is then more than limit).
func (f *Files) send(ctx context.Context, h Handle, r io.Reader, limit int64) (int64, string, error) {
	chunk := f.s.o.ChunkBytes
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, f.s.o.Window)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	fail := func(err error) {
		once.Do(func() { first = err; cancel() })
	}
	sum := sha256.New()
	var n int64
	for ctx.Err() == nil {
		buf, _ := chunkPool.Get().(*[]byte)
		if buf == nil || cap(*buf) < chunk {
			b := make([]byte, chunk)
			buf = &b
		}
		k, rerr := io.ReadFull(r, (*buf)[:chunk])
		if k > 0 && n+int64(k) > limit {
			n += int64(k)
			chunkPool.Put(buf)
			fail(errOverLimit)
			break
		}
		if k > 0 {
			sum.Write((*buf)[:k])
			off := n
			n += int64(k)
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				chunkPool.Put(buf)
				continue
			}
			wg.Go(func() {
				defer func() { <-sem; chunkPool.Put(buf) }()
				if err := f.s.k.WriteChunk(ctx, f.conn, h, off, (*buf)[:k]); err != nil {
					fail(err)
				}
			})
		} else {
			chunkPool.Put(buf)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			fail(rerr)
		}
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return n, hex.EncodeToString(sum.Sum(nil)), first
}

// abort discards an upload's or a download's handle in the kernel, even when
// ctx is done.
func (f *Files) abort(ctx context.Context, h Handle) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.s.o.AbortTimeout)
	defer cancel()
	_ = f.s.k.Abort(actx, f.conn, h)
}

// List lists the directory at path ("" for the session directory): at most max
// entries (api.DefaultMaxListEntries when maxEntries <= 0), sorted by name, with
// Truncated when there were more, as workspace.Session.List. Names the kernel
// reports that are not plain UTF-8 file names are left out.
func (f *Files) List(ctx context.Context, path string, maxEntries int) (api.DirListing, error) {
	const op = "list"
	if err := checkPath(op, path, true); err != nil {
		return api.DirListing{}, err
	}
	if path == "." {
		path = ""
	}
	if maxEntries <= 0 {
		maxEntries = api.DefaultMaxListEntries
	}
	var b struct {
		refusal
		Entries   []json.RawMessage `json:"entries"`
		Truncated bool              `json:"truncated"`
	}
	if err := f.s.k.call(ctx, f.conn, "flist", relArgs{Rel: path, Max: maxEntries}, nil, &b); err != nil {
		return api.DirListing{}, fmt.Errorf("%s %q: %w", op, path, err)
	}
	if err := b.err(op, path); err != nil {
		return api.DirListing{}, err
	}
	l := api.DirListing{Path: path, Entries: []api.FileEntry{}, Truncated: b.Truncated || len(b.Entries) > maxEntries}
	for _, raw := range b.Entries[:min(len(b.Entries), maxEntries)] {
		var e struct {
			name, typ string
			size, ns  int64
		}
		fields := []any{&e.name, &e.typ, &e.size, &e.ns}
		var parts []json.RawMessage
		if json.Unmarshal(raw, &parts) != nil || len(parts) != len(fields) {
			continue
		}
		bad := false
		for i, p := range parts {
			bad = bad || json.Unmarshal(p, fields[i]) != nil
		}
		if bad || paths.CheckName(e.name, paths.Listed) != nil {
			continue
		}
		switch e.typ {
		case "file", "dir", "symlink":
		default:
			e.typ = "other"
		}
		l.Entries = append(l.Entries, api.FileEntry{Name: e.name, Type: e.typ, Size: max(e.size, 0), ModTime: time.Unix(0, e.ns).UTC()})
	}
	slices.SortFunc(l.Entries, func(a, b api.FileEntry) int { return cmp.Compare(a.Name, b.Name) })
	return l, nil
}

// Remove deletes the file at path (a link itself, never its target); a
// directory only when recursive is set, else is_directory; a missing path is
// not_found, as workspace.Session.Remove.
func (f *Files) Remove(ctx context.Context, path string, recursive bool) error {
	const op = "remove"
	if err := checkPath(op, path, false); err != nil {
		return err
	}
	var b refusal
	if err := f.s.k.call(ctx, f.conn, "frm", relArgs{Rel: path, Recursive: recursive}, nil, &b); err != nil {
		return fmt.Errorf("%s %q: %w", op, path, err)
	}
	return b.err(op, path)
}
