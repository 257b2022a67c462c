package kernelfs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kernelbox/kernelbox/jupyter"
)

// The operations of kernelsync.py, one method each. Paths ("rel") are relative to
// the session directory, slash-separated; the kernel side refuses absolute paths and
// "." or ".." elements.

// Stat is what the kernel reports of a file: size, mtime_ns, inode, ctime_ns.
type Stat [4]int64

// Size returns the file's size in bytes.
func (s Stat) Size() int64 { return s[0] }

// MTime returns the file's modification time in nanoseconds since the epoch.
func (s Stat) MTime() int64 { return s[1] }

// Handle names a transfer in progress in the kernel.
type Handle int64

// SetupRequest asks the kernel to work in the session's directory.
type SetupRequest struct {
	Base  string `json:"base"`  // where session directories live (relative to the starting directory, or absolute)
	SID   string `json:"sid"`   // the session's name, the first part of its directory's name ([A-Za-z0-9_-], at most 200)
	Nonce string `json:"nonce"` // 32 hex digits drawn for the incarnation: the directory is Base/SID-Nonce
	Known string `json:"known"` // the directory set up before, "" for none: a restarted kernel gets it again
	// Reap is how many seconds without a heartbeat make a sibling directory
	// abandoned (removed when a new directory is made). Zero means an hour.
	Reap float64 `json:"reap,omitempty"`
}

// SetupAnswer is the kernel's answer to Setup.
type SetupAnswer struct {
	Dir    string `json:"dir"`    // the session directory, absolute
	Cwd0   string `json:"cwd0"`   // the kernel's starting directory
	New    bool   `json:"new"`    // the kernel process was not set up before
	Made   bool   `json:"made"`   // the directory was made empty (a new one, or a known one that had been reaped)
	Parent bool   `json:"parent"` // payloads can ride in the request's content
}

// Setup makes sure the kernel process has the module and works in the session's
// directory, creating its inputs/ and outputs/, and removes leftover temporary
// files. A new directory is made empty, mode 0700, and refused if it exists; its
// abandoned siblings are removed in the background (see kernelsync.py). The
// kernel keeps the directory's heartbeat and removes it when it is shut down, not
// when it is restarted. Setup learns whether payloads can ride in the request
// (see Literal).
func (k *Kernel) Setup(ctx context.Context, conn *jupyter.Conn, req SetupRequest) (SetupAnswer, error) {
	k.literal.Store(false) // try the payload route; the answer says whether it works
	var ans SetupAnswer
	if err := k.call(ctx, conn, "setup", req, []byte{}, &ans); err != nil {
		return ans, err
	}
	k.literal.Store(!ans.Parent)
	return ans, nil
}

type relsRequest struct {
	Rels  []string `json:"rels"`
	Limit int64    `json:"limit,omitempty"`
}

// Stat returns the stat of each named regular file; a missing or irregular one
// maps to nil.
func (k *Kernel) Stat(ctx context.Context, conn *jupyter.Conn, rels []string) (map[string]*Stat, error) {
	var out map[string]*Stat
	err := k.call(ctx, conn, "stat", relsRequest{Rels: rels}, nil, &out)
	return out, err
}

// Sums returns the SHA-256 (hex) of each named regular file, reading at most limit+1
// bytes of each (0: no limit); a missing or irregular one maps to nil.
func (k *Kernel) Sums(ctx context.Context, conn *jupyter.Conn, rels []string, limit int64) (map[string]*string, error) {
	var out map[string]*string
	err := k.call(ctx, conn, "sums", relsRequest{Rels: rels, Limit: limit}, nil, &out)
	return out, err
}

// WriteRequest describes a file to write in the kernel.
type WriteRequest struct {
	Rel  string `json:"rel"`
	Size int64  `json:"size"`
	SHA  string `json:"sha,omitempty"` // its SHA-256, hex; checked before it is moved into place
	Mode int    `json:"mode"`
}

// Written is what the kernel reports of a file it wrote.
type Written struct {
	Size int64  `json:"size"`
	SHA  string `json:"sha"`
	Stat Stat   `json:"stat"`
}

// WriteFile writes a whole file from data, checking its size and SHA-256, through a
// temporary file renamed into place.
func (k *Kernel) WriteFile(ctx context.Context, conn *jupyter.Conn, req WriteRequest, data []byte) (Written, error) {
	var ans Written
	err := k.call(ctx, conn, "wfile", req, data, &ans)
	return ans, err
}

// BeginWrite starts a chunked write of req.Size bytes to a temporary file.
func (k *Kernel) BeginWrite(ctx context.Context, conn *jupyter.Conn, req WriteRequest) (Handle, error) {
	var ans struct {
		H Handle `json:"h"`
	}
	err := k.call(ctx, conn, "wbegin", req, nil, &ans)
	return ans.H, err
}

type chunkRequest struct {
	H    Handle `json:"h"`
	Off  int64  `json:"off,omitempty"`
	N    int64  `json:"n,omitempty"`
	SHA  string `json:"sha,omitempty"`
	Size int64  `json:"size,omitempty"`
}

// WriteChunk writes data at off; chunks may arrive in any order.
func (k *Kernel) WriteChunk(ctx context.Context, conn *jupyter.Conn, h Handle, off int64, data []byte) error {
	return k.call(ctx, conn, "wput", chunkRequest{H: h, Off: off}, data, nil)
}

// EndWrite checks the written file's size and SHA-256 and moves it into place.
func (k *Kernel) EndWrite(ctx context.Context, conn *jupyter.Conn, h Handle, sha string) (Written, error) {
	var ans Written
	err := k.call(ctx, conn, "wend", chunkRequest{H: h, SHA: sha}, nil, &ans)
	return ans, err
}

// Abort ends a transfer, discarding a write's temporary file.
func (k *Kernel) Abort(ctx context.Context, conn *jupyter.Conn, h Handle) error {
	return k.call(ctx, conn, "abort", chunkRequest{H: h}, nil, nil)
}

type commitRequest struct {
	Src string `json:"src"`
	WriteRequest
}

// Commit checks the size and SHA-256 of src, a file uploaded through the Contents
// API, and moves it to req.Rel.
func (k *Kernel) Commit(ctx context.Context, conn *jupyter.Conn, src string, req WriteRequest) (Written, error) {
	var ans Written
	err := k.call(ctx, conn, "commit", commitRequest{Src: src, WriteRequest: req}, nil, &ans)
	return ans, err
}

// Remove removes a file; a missing one is not an error.
func (k *Kernel) Remove(ctx context.Context, conn *jupyter.Conn, rel string) error {
	return k.call(ctx, conn, "rm", struct {
		Rel string `json:"rel"`
	}{rel}, nil, nil)
}

// ListRequest asks for the regular files of outputs/.
type ListRequest struct {
	FP     string `json:"fp"`     // the fingerprint of the last listing: unchanged answers Same
	Max    int    `json:"max"`    // entries examined at most
	Depth  int    `json:"depth"`  // directory levels below outputs/
	Inline int    `json:"inline"` // files listed at most; beyond, More is set
}

// Listing is the kernel's answer to List: whether outputs/ changed, and if so what
// it holds.
type Listing struct {
	FP        string      `json:"fp"`
	Same      bool        `json:"same"`
	Files     []FileEntry `json:"files"`
	More      bool        `json:"more"`      // too many files to list inline
	Skipped   [][2]string `json:"skipped"`   // [name, why]: symlinks, special files, too deep
	Truncated bool        `json:"truncated"` // more than Max entries
	Now       int64       `json:"now"`       // the kernel's clock, ns
}

// FileEntry is one regular file of a listing.
type FileEntry struct {
	Rel  string
	Stat Stat
}

// UnmarshalJSON decodes [rel, size, mtime_ns, ino, ctime_ns] exactly (nanosecond
// times do not fit a float64).
func (f *FileEntry) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if len(raw) != 5 {
		return fmt.Errorf("file entry has %d fields, want 5", len(raw))
	}
	if err := json.Unmarshal(raw[0], &f.Rel); err != nil {
		return err
	}
	for i := range f.Stat {
		if err := json.Unmarshal(raw[i+1], &f.Stat[i]); err != nil {
			return err
		}
	}
	return nil
}

// List lists outputs/ unless it is unchanged since req.FP.
func (k *Kernel) List(ctx context.Context, conn *jupyter.Conn, req ListRequest) (Listing, error) {
	var ans Listing
	err := k.call(ctx, conn, "probe", req, nil, &ans)
	return ans, err
}

// ProbeExpr returns the expression that, evaluated after a call's code, answers as
// List does, in a form ParseProbe reads; "" when req.FP is not a fingerprint the
// kernel made ("" asks for a listing). It is a plain call with literal arguments, to keep the cost on every
// call small.
func ProbeExpr(req ListRequest) string {
	if !plainFP(req.FP) {
		return ""
	}
	return fmt.Sprintf("__import__('%s').probe('%s', %d, %d, %d)", moduleName, req.FP, req.Max, req.Depth, req.Inline)
}

// plainFP reports whether a fingerprint from the kernel is safe in a literal.
func plainFP(fp string) bool {
	for i := 0; i < len(fp); i++ {
		if c := fp[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || c == '-') {
			return false
		}
	}
	return true
}

// ParseProbe reads the ProbeExpr's result from an execute_reply's
// user_expressions; nil when it does not tell (missing, failed, unreadable).
func ParseProbe(raw json.RawMessage) *Listing {
	var r exprResult
	if len(raw) == 0 || json.Unmarshal(raw, &r) != nil || r.Status != "ok" {
		return nil
	}
	text, hasText := r.Data["text/plain"]
	var l Listing
	switch {
	case len(r.Data) == 0 || text == "0":
		// The kernel side's "unchanged" (see _Unchanged in kernelsync.py).
		return &Listing{Same: true}
	case !hasText:
	case json.Unmarshal([]byte(text), &l) == nil && l.FP != "":
		return &l
	}
	return nil
}

// ReadFile is one file of a ReadMany answer.
type ReadFile struct {
	Rel     string `json:"rel"`
	Data    string `json:"data"` // base64
	SHA     string `json:"sha"`
	Stat    Stat   `json:"stat"`
	Changed bool   `json:"changed"` // it changed while it was read
	Big     bool   `json:"big"`     // over the budget: read it with OpenRead
	Err     string `json:"err"`     // missing or not a regular file
}

// ReadMany reads several small files whole, within budget bytes in all.
func (k *Kernel) ReadMany(ctx context.Context, conn *jupyter.Conn, rels []string, budget int) ([]ReadFile, error) {
	var ans struct {
		Files []ReadFile `json:"files"`
	}
	err := k.call(ctx, conn, "rmany", struct {
		Rels   []string `json:"rels"`
		Budget int      `json:"budget"`
	}{rels, budget}, nil, &ans)
	return ans.Files, err
}

// Opened is a file opened for a chunked read.
type Opened struct {
	H    Handle `json:"h"`
	Stat Stat   `json:"stat"`
}

// OpenRead opens a regular file (never following a symlink) for ReadChunk.
func (k *Kernel) OpenRead(ctx context.Context, conn *jupyter.Conn, rel string) (Opened, error) {
	var ans Opened
	err := k.call(ctx, conn, "ropen", struct {
		Rel string `json:"rel"`
	}{rel}, nil, &ans)
	return ans, err
}

// ReadChunk reads up to n bytes at off; fewer at the end of the file.
func (k *Kernel) ReadChunk(ctx context.Context, conn *jupyter.Conn, h Handle, off, n int64) ([]byte, error) {
	var data []byte
	if err := k.call(ctx, conn, "rread", chunkRequest{H: h, Off: off, N: n}, nil, base64Data(&data)); err != nil {
		return nil, err
	}
	return data, nil
}

// ReadEnd is the kernel's answer to EndRead.
type ReadEnd struct {
	SHA     string `json:"sha"`     // of the first size bytes
	Stat    Stat   `json:"stat"`    // the file's stat now
	Changed bool   `json:"changed"` // it changed since OpenRead
}

// EndRead closes a chunked read and returns the SHA-256 of the file's first size
// bytes as the kernel read them.
func (k *Kernel) EndRead(ctx context.Context, conn *jupyter.Conn, h Handle, size int64) (ReadEnd, error) {
	var ans ReadEnd
	err := k.call(ctx, conn, "rend", chunkRequest{H: h, Size: size}, nil, &ans)
	return ans, err
}
