package remote

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/kernelbox/kernelbox/jupyter"
)

// racyNS: a file modified this close to a listing may change again within the file
// system's timestamp granularity without its stat changing, so it is compared by
// checksum until it is older (the kernel side salts the fingerprint for the same
// reason).
const racyNS = 2_000_000_000

// inlineFiles is how many files a probe answer may list inline.
const inlineFiles = 500

// pullTempPrefix names the host temporary files of pulls. They are made in the
// session directory, not in outputs/, so an interrupted pull never leaves one where
// Collect would take it for an output.
const pullTempPrefix = ".kb-pull-"

// listing is the kernel's answer to "probe": whether outputs/ changed, and if so
// what it holds.
type listing struct {
	FP        string      `json:"fp"`
	Same      bool        `json:"same"`
	Files     []fileEntry `json:"files"`
	More      bool        `json:"more"` // too many files to list inline
	Skipped   [][2]string `json:"skipped"`
	Truncated bool        `json:"truncated"`
	Now       int64       `json:"now"`
}

type fileEntry struct {
	rel string
	st  remoteStat
}

// UnmarshalJSON decodes [rel, size, mtime_ns, ino, ctime_ns] exactly (nanosecond
// times do not fit a float64).
func (f *fileEntry) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if len(raw) != 5 {
		return fmt.Errorf("file entry has %d fields, want 5", len(raw))
	}
	if err := json.Unmarshal(raw[0], &f.rel); err != nil {
		return err
	}
	for i := range f.st {
		if err := json.Unmarshal(raw[i+1], &f.st[i]); err != nil {
			return err
		}
	}
	return nil
}

func (p *Placement) probeArgs(fp string, inline int) map[string]any {
	return map[string]any{"fp": fp, "max": p.b.opts.MaxOutputFiles, "depth": maxDepth, "inline": inline}
}

// OutputsProbe returns the user expression that, evaluated after a call's code,
// tells whether the kernel's outputs/ changed (see executor.FileSyncer). It is
// "" until the session's remote directory is set up. It is a plain call with literal
// arguments, to keep the cost on every call small.
func (p *Placement) OutputsProbe() string {
	if p.sync.dir == "" || !plainFP(p.sync.fp) {
		return ""
	}
	return fmt.Sprintf("__import__('%s').probe('%s', %d, %d, %d)", moduleName, p.sync.fp, p.b.opts.MaxOutputFiles, maxDepth, inlineFiles)
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

// PullOutputs copies the new or changed regular files of the kernel's outputs/ into
// hostDir/outputs/, where the executor collects artifacts from as for every backend.
// Symlinks and special files are skipped (never followed); a file over MaxFileBytes
// is skipped with a note, once per version. Each file's SHA-256 as computed by the
// kernel is checked against what arrived. Files already on the host with the same
// content are not fetched again. probe is the OutputsProbe expression's result from
// the call's execute_reply; with nil (no result) it asks the kernel itself.
func (p *Placement) PullOutputs(ctx context.Context, conn *jupyter.Conn, hostDir string, probe json.RawMessage) error {
	var ls *listing
	if len(probe) > 0 {
		var r exprResult
		if json.Unmarshal(probe, &r) == nil && r.Status == "ok" {
			text, hasText := r.Data["text/plain"]
			var l listing
			switch {
			case len(r.Data) == 0 || text == "0":
				// The kernel side's "unchanged" (see _Unchanged in kernelsync.py).
				ls = &listing{Same: true}
			case !hasText:
			case json.Unmarshal([]byte(text), &l) == nil && l.FP != "":
				ls = &l
			}
		}
	}
	if ls != nil && ls.Same {
		return p.track(conn)
	}
	return p.pull(ctx, conn, hostDir, ls)
}

func (p *Placement) pull(ctx context.Context, conn *jupyter.Conn, hostDir string, ls *listing) error {
	if err := p.track(conn); err != nil {
		return err
	}
	if p.sync.dir == "" {
		if _, err := p.setup(ctx, conn, hostDir); err != nil {
			return err
		}
	}
	if ls == nil || ls.More {
		ls = &listing{}
		err := p.op(ctx, conn, "probe", p.probeArgs(p.sync.fp, p.b.opts.MaxOutputFiles+1), nil, ls)
		var ke *KernelError
		if errors.As(err, &ke) && strings.Contains(ke.Evalue, "not set up") {
			// A kernel process that was restarted since the last push (the executor
			// restarts a kernel that ignores an interrupt after a timeout, then
			// collects): set it up now, so it is ready for the next call.
			p.b.log.Info("setting up a restarted kernel", "session", filepath.Base(hostDir), "gateway", p.gw.name)
			if _, err := p.setup(ctx, conn, hostDir); err != nil {
				return err
			}
			err = p.op(ctx, conn, "probe", p.probeArgs(p.sync.fp, p.b.opts.MaxOutputFiles+1), nil, ls)
		}
		if err != nil {
			return fmt.Errorf("list outputs: %w", err)
		}
	}
	if ls.Same {
		return nil
	}
	root, err := os.OpenRoot(hostDir)
	if err != nil {
		return fmt.Errorf("open session directory: %w", err)
	}
	defer root.Close()
	pl := &puller{p: p, conn: conn, root: root, ls: ls}
	pl.run(ctx)
	if !pl.incomplete {
		p.sync.fp = ls.FP
	} else {
		p.sync.fp = ""
	}
	return errors.Join(pl.notes...)
}

// puller is the state of one pull.
type puller struct {
	p          *Placement
	conn       *jupyter.Conn
	root       *os.Root
	ls         *listing
	notes      []error
	incomplete bool // something may be left to pull: list again next time
}

func (pl *puller) note(err error, transient bool) {
	pl.notes = append(pl.notes, err)
	if transient {
		pl.incomplete = true
	}
}

// skipBig records an output over MaxFileBytes, noting it once per version.
func (pl *puller) skipBig(rel string, st remoteStat) {
	p := pl.p
	if prev, ok := p.sync.seen[rel]; !ok || !prev.skipped || prev.stat != st {
		pl.note(fmt.Errorf("outputs/%s is %d bytes, over the remote backend's limit of %d bytes per file; not collected", rel, st[0], p.b.opts.MaxFileBytes), false)
	}
	p.sync.seen[rel] = seenFile{stat: st, skipped: true}
}

func (pl *puller) run(ctx context.Context) {
	p, ls := pl.p, pl.ls
	for _, s := range ls.Skipped {
		p.b.log.Info("skipped remote output", "name", s[0], "why", s[1], "gateway", p.gw.name)
	}
	if ls.Truncated {
		pl.note(fmt.Errorf("outputs/ holds more than %d entries; the rest were not pulled from the kernel", p.b.opts.MaxOutputFiles), false)
	}
	present := make(map[string]bool, len(ls.Files))
	var fetch, verify []fileEntry
	for _, f := range ls.Files {
		if err := checkRel(f.rel); err != nil {
			pl.note(fmt.Errorf("outputs/%q: %w; not pulled", f.rel, err), false)
			continue
		}
		present[f.rel] = true
		prev, ok := p.sync.seen[f.rel]
		if f.st[0] > p.b.opts.MaxFileBytes {
			pl.skipBig(f.rel, f.st)
			continue
		}
		racy := f.st[1] > ls.Now-racyNS
		switch {
		case ok && !prev.skipped && prev.stat == f.st && !racy:
		case ok && !prev.skipped && prev.stat == f.st:
			verify = append(verify, f)
		case !ok && pl.hostSize(f.rel) == f.st[0]:
			verify = append(verify, f)
		default:
			fetch = append(fetch, f)
		}
	}
	fetch = append(fetch, pl.verify(ctx, verify)...)
	pl.fetch(ctx, fetch)
	if !ls.Truncated {
		for rel := range p.sync.seen {
			if !present[rel] {
				delete(p.sync.seen, rel)
			}
		}
	}
}

// hostSize returns the size of outputs/rel on the host, or -1.
func (pl *puller) hostSize(rel string) int64 {
	fi, err := pl.root.Lstat("outputs/" + rel)
	if err != nil || !fi.Mode().IsRegular() {
		return -1
	}
	return fi.Size()
}

// verify compares the checksums of files that may be unchanged and returns those
// that differ.
func (pl *puller) verify(ctx context.Context, files []fileEntry) []fileEntry {
	if len(files) == 0 {
		return nil
	}
	p := pl.p
	rels := make([]string, len(files))
	for i, f := range files {
		rels[i] = "outputs/" + f.rel
	}
	var sums map[string]*string
	if err := p.op(ctx, pl.conn, "sums", map[string]any{"rels": rels, "limit": p.b.opts.MaxFileBytes}, nil, &sums); err != nil {
		pl.note(fmt.Errorf("compare outputs: %w", err), true)
		return nil
	}
	var differ []fileEntry
	for _, f := range files {
		got := sums["outputs/"+f.rel]
		if got == nil {
			continue // gone since the listing
		}
		prev, ok := p.sync.seen[f.rel]
		want := prev.sha
		if !ok {
			want = pl.hostSum(f.rel)
		}
		if *got == want {
			p.sync.seen[f.rel] = seenFile{stat: f.st, sha: want}
			continue
		}
		differ = append(differ, f)
	}
	return differ
}

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
func (pl *puller) fetch(ctx context.Context, files []fileEntry) {
	budget := int64(pl.p.b.pullChunk())
	var batch []string
	var size int64
	flush := func() {
		if len(batch) > 0 {
			pl.fetchMany(ctx, batch)
		}
		batch, size = nil, 0
	}
	for _, f := range files {
		if f.st[0] > budget/4 {
			pl.fetchLarge(ctx, f.rel)
			continue
		}
		if size+f.st[0] > budget {
			flush()
		}
		batch = append(batch, f.rel)
		size += f.st[0]
	}
	flush()
}

type manyAnswer struct {
	Files []struct {
		Rel     string     `json:"rel"`
		Data    string     `json:"data"`
		SHA     string     `json:"sha"`
		Stat    remoteStat `json:"stat"`
		Changed bool       `json:"changed"`
		Big     bool       `json:"big"`
		Err     string     `json:"err"`
	} `json:"files"`
}

func (pl *puller) fetchMany(ctx context.Context, rels []string) {
	p := pl.p
	paths := make([]string, len(rels))
	for i, rel := range rels {
		paths[i] = "outputs/" + rel
	}
	var ans manyAnswer
	if err := p.op(ctx, pl.conn, "rmany", map[string]any{"rels": paths, "budget": p.b.pullChunk()}, nil, &ans); err != nil {
		pl.note(fmt.Errorf("pull outputs: %w", err), true)
		return
	}
	want := make(map[string]bool, len(rels))
	for _, rel := range rels {
		want["outputs/"+rel] = true
	}
	for _, f := range ans.Files {
		if !want[f.Rel] {
			pl.note(fmt.Errorf("pull outputs: the kernel answered for %q, which was not asked for", f.Rel), true)
			continue
		}
		delete(want, f.Rel)
		rel := strings.TrimPrefix(f.Rel, "outputs/")
		switch {
		case f.Err != "":
			p.b.log.Debug("remote output vanished or unreadable", "name", rel, "err", f.Err)
			pl.incomplete = true
		case f.Big:
			pl.fetchLarge(ctx, rel)
		default:
			data, err := base64.StdEncoding.DecodeString(f.Data)
			if err != nil {
				pl.note(fmt.Errorf("pull outputs/%s: %w", rel, err), true)
				continue
			}
			sum := sha256.Sum256(data)
			if got := hex.EncodeToString(sum[:]); got != f.SHA || int64(len(data)) > p.b.opts.MaxFileBytes {
				pl.note(fmt.Errorf("pull outputs/%s: checksum mismatch: received sha256 %s, the kernel read %s", rel, got, f.SHA), true)
				continue
			}
			if err := pl.writeHost(rel, func(w *os.File) error { _, err := w.Write(data); return err }); err != nil {
				pl.note(fmt.Errorf("pull outputs/%s: %w", rel, err), true)
				continue
			}
			if f.Changed {
				pl.incomplete = true // it was being written: fetch it again next time
				continue
			}
			p.sync.seen[rel] = seenFile{stat: f.Stat, sha: f.SHA}
		}
	}
	if len(want) > 0 {
		pl.incomplete = true
	}
}

type openAnswer struct {
	H    int64      `json:"h"`
	Stat remoteStat `json:"stat"`
}

type endAnswer struct {
	SHA     string     `json:"sha"`
	Stat    remoteStat `json:"stat"`
	Changed bool       `json:"changed"`
}

// fetchLarge copies one file in chunks, Window of them in flight, written at their
// offsets into a host temporary file that is hashed before it is renamed into place.
func (pl *puller) fetchLarge(ctx context.Context, rel string) {
	p := pl.p
	var op openAnswer
	if err := p.op(ctx, pl.conn, "ropen", map[string]any{"rel": "outputs/" + rel}, nil, &op); err != nil {
		p.b.log.Debug("remote output vanished or unreadable", "name", rel, "err", err)
		pl.incomplete = true
		return
	}
	size := op.Stat[0]
	closeIt := func() {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.b.opts.HealthTimeout)
		defer cancel()
		_ = p.op(actx, pl.conn, "abort", map[string]any{"h": op.H}, nil, nil)
	}
	if size > p.b.opts.MaxFileBytes {
		closeIt()
		pl.skipBig(rel, op.Stat)
		return
	}
	var end endAnswer
	var sum string
	err := pl.writeHost(rel, func(w *os.File) error {
		chunk := int64(p.b.pullChunk())
		n := int((size + chunk - 1) / chunk)
		err := p.window(ctx, n, func(ctx context.Context, i int) error {
			off := int64(i) * chunk
			want := min(chunk, size-off)
			var b64 string
			if err := p.op(ctx, pl.conn, "rread", map[string]any{"h": op.H, "off": off, "n": want}, nil, rawText(&b64)); err != nil {
				return err
			}
			data, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				return err
			}
			if int64(len(data)) != want {
				return fmt.Errorf("the file shrank while it was read (got %d bytes at offset %d, want %d)", len(data), off, want)
			}
			_, err = w.WriteAt(data, off)
			return err
		})
		if err != nil {
			closeIt()
			return err
		}
		if err := p.op(ctx, pl.conn, "rend", map[string]any{"h": op.H, "size": size}, nil, &end); err != nil {
			return err
		}
		if _, err := w.Seek(0, io.SeekStart); err != nil {
			return err
		}
		h := sha256.New()
		if _, err := io.Copy(h, w); err != nil {
			return err
		}
		if sum = hex.EncodeToString(h.Sum(nil)); sum != end.SHA {
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
	p.sync.seen[rel] = seenFile{stat: op.Stat, sha: sum}
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

// checkRel accepts a name below outputs/ as the kernel reports it only when it is a
// plain relative path: no empty, "." or ".." element, no NUL, valid UTF-8, not too
// deep or long. The kernel is not trusted with host paths.
func checkRel(rel string) error {
	if rel == "" || len(rel) > 4096 || strings.ContainsRune(rel, 0) || !utf8.ValidString(rel) || strings.HasPrefix(rel, "/") {
		return errors.New("not a plain relative path")
	}
	parts := strings.Split(rel, "/")
	if len(parts) > maxDepth+1 {
		return errors.New("too deep")
	}
	for _, part := range parts {
		if part == "" || part == "." || part == ".." || len(part) > 255 {
			return errors.New("not a plain relative path")
		}
	}
	return nil
}
