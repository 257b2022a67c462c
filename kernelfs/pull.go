package kernelfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kernelbox/kernelbox/internal/paths"
	"github.com/kernelbox/kernelbox/jupyter"
)

// racyNS: a file modified this close to a listing may change again within the file
// system's timestamp granularity without its stat changing, so it is compared by
// checksum until it is older (the kernel side salts the fingerprint for the same
// reason).
const racyNS = 2_000_000_000

// pullTempPrefix names the host temporary files of pulls. They are made in the
// session directory, not in outputs/, so an interrupted pull never leaves one where
// Collect would take it for an output.
const pullTempPrefix = ".kb-pull-"

// OutputsProbe returns the user expression that, evaluated after a call's code,
// tells whether the kernel's outputs/ changed (see executor.FileSyncer). It is ""
// until the session's remote directory is set up and listed once.
func (s *Syncer) OutputsProbe() string {
	if s.dir == "" {
		return ""
	}
	return ProbeExpr(s.listRequest(inlineFiles))
}

func (s *Syncer) listRequest(inline int) ListRequest {
	return ListRequest{FP: s.fp, Max: s.o.MaxOutputFiles, Depth: MaxDepth, Inline: inline}
}

// PullOutputs copies the new or changed regular files of the kernel's outputs/ into
// hostDir/outputs/, where the executor collects artifacts from as for every backend.
// Symlinks and special files are skipped (never followed); a file over MaxFileBytes
// is skipped with a note, once per version. Each file's SHA-256 as computed by the
// kernel is checked against what arrived. Files already on the host with the same
// content are not fetched again. probe is the OutputsProbe expression's result from
// the call's execute_reply; with nil (no result) it asks the kernel itself.
func (s *Syncer) PullOutputs(ctx context.Context, conn *jupyter.Conn, hostDir string, probe json.RawMessage) error {
	ls := ParseProbe(probe)
	if ls != nil && ls.Same {
		return nil
	}
	if s.dir == "" {
		if _, err := s.setup(ctx, conn, hostDir); err != nil {
			return err
		}
	}
	if ls == nil || ls.More {
		l, err := s.list(ctx, conn, hostDir)
		if err != nil {
			return fmt.Errorf("list outputs: %w", err)
		}
		ls = &l
	}
	if ls.Same {
		return nil
	}
	root, err := os.OpenRoot(hostDir)
	if err != nil {
		return fmt.Errorf("open session directory: %w", err)
	}
	defer root.Close()
	pl := &puller{s: s, conn: conn, root: root, ls: ls}
	pl.run(ctx)
	if !pl.incomplete {
		s.fp = ls.FP
	} else {
		s.fp = ""
	}
	return errors.Join(pl.notes...)
}

// list asks the kernel for outputs/. A kernel process restarted since the last push
// (the executor restarts a kernel that ignores an interrupt after a timeout, then
// collects) is set up first, so it is ready for the next call.
func (s *Syncer) list(ctx context.Context, conn *jupyter.Conn, hostDir string) (Listing, error) {
	ls, err := s.k.List(ctx, conn, s.listRequest(s.o.MaxOutputFiles+1))
	if errors.Is(err, ErrNotSetUp) {
		s.log.Info("setting up a restarted kernel", "session", filepath.Base(hostDir))
		if _, err := s.setup(ctx, conn, hostDir); err != nil {
			return ls, err
		}
		ls, err = s.k.List(ctx, conn, s.listRequest(s.o.MaxOutputFiles+1))
	}
	return ls, err
}

// puller is the state of one pull.
type puller struct {
	s          *Syncer
	conn       *jupyter.Conn
	root       *os.Root
	ls         *Listing
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
func (pl *puller) skipBig(rel string, st Stat) {
	s := pl.s
	if prev, ok := s.seen[rel]; !ok || !prev.skipped || prev.stat != st {
		pl.note(fmt.Errorf("outputs/%s is %d bytes, over the remote backend's limit of %d bytes per file; not collected", rel, st.Size(), s.o.MaxFileBytes), false)
	}
	s.seen[rel] = seenFile{stat: st, skipped: true}
}

func (pl *puller) run(ctx context.Context) {
	s, ls := pl.s, pl.ls
	for _, sk := range ls.Skipped {
		s.log.Info("skipped remote output", "name", sk[0], "why", sk[1])
	}
	if ls.Truncated {
		pl.note(fmt.Errorf("outputs/ holds more than %d entries; the rest were not pulled from the kernel", s.o.MaxOutputFiles), false)
	}
	present := make(map[string]bool, len(ls.Files))
	var fetch, verify []FileEntry
	for _, f := range ls.Files {
		if err := checkRel(f.Rel); err != nil {
			pl.note(fmt.Errorf("outputs/%q: %w; not pulled", f.Rel, err), false)
			continue
		}
		present[f.Rel] = true
		prev, ok := s.seen[f.Rel]
		if f.Stat.Size() > s.o.MaxFileBytes {
			pl.skipBig(f.Rel, f.Stat)
			continue
		}
		racy := f.Stat.MTime() > ls.Now-racyNS
		switch {
		case ok && !prev.skipped && prev.stat == f.Stat && !racy:
		case ok && !prev.skipped && prev.stat == f.Stat:
			verify = append(verify, f)
		case !ok && pl.hostSize(f.Rel) == f.Stat.Size():
			verify = append(verify, f)
		default:
			fetch = append(fetch, f)
		}
	}
	fetch = append(fetch, pl.verify(ctx, verify)...)
	pl.fetch(ctx, fetch)
	if !ls.Truncated {
		for rel := range s.seen {
			if !present[rel] {
				delete(s.seen, rel)
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
func (pl *puller) verify(ctx context.Context, files []FileEntry) []FileEntry {
	if len(files) == 0 {
		return nil
	}
	s := pl.s
	rels := make([]string, len(files))
	for i, f := range files {
		rels[i] = "outputs/" + f.Rel
	}
	sums, err := s.k.Sums(ctx, pl.conn, rels, s.o.MaxFileBytes)
	if err != nil {
		pl.note(fmt.Errorf("compare outputs: %w", err), true)
		return nil
	}
	var differ []FileEntry
	for _, f := range files {
		got := sums["outputs/"+f.Rel]
		if got == nil {
			continue // gone since the listing
		}
		prev, ok := s.seen[f.Rel]
		want := prev.sha
		if !ok {
			want = pl.hostSum(f.Rel)
		}
		if *got == want {
			s.seen[f.Rel] = seenFile{stat: f.Stat, sha: want}
			continue
		}
		differ = append(differ, f)
	}
	return differ
}

// checkRel accepts a name below outputs/ as the kernel reports it only when it is a
// plain relative path, at most MaxDepth directories deep: the kernel is not
// trusted with host paths. Temporary names pass, to be skipped by Collect as a
// local session's are.
func checkRel(rel string) error {
	if err := paths.CheckPath(rel, paths.PathRule{AllowTemp: true, MaxDepth: MaxDepth}); err != nil {
		return fmt.Errorf("not a plain relative path: %w", err)
	}
	return nil
}
