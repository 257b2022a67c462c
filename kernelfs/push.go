package kernelfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/internal/filestamp"
	"github.com/kernelbox/kernelbox/internal/paths"
	"github.com/kernelbox/kernelbox/jupyter"
)

// openReadFlags opens a host file without following a final symlink and without
// blocking on a FIFO: the one rule of internal/paths.
const openReadFlags = paths.ReadFlags

// PushInputs copies the named files of hostDir/inputs to the kernel's inputs/. For a
// kernel process it has not set up yet (a new or restarted kernel), it first makes
// the session's remote directory its working directory, then copies every file of
// hostDir/inputs and hostDir/data that the remote side lacks, so a session moved to
// another gateway keeps its inputs and data. Files already there with the same
// SHA-256 are not sent again. Each file is verified on both sides.
func (s *Syncer) PushInputs(ctx context.Context, conn *jupyter.Conn, hostDir string, names []string) error {
	fresh, err := s.setup(ctx, conn, hostDir)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(hostDir)
	if err != nil {
		return fmt.Errorf("open session directory: %w", err)
	}
	defer root.Close()
	var rels []string
	if fresh {
		if rels, err = hostFiles(root); err != nil {
			return err
		}
	}
	for _, n := range names {
		if err := paths.CheckName(n, paths.Plain); err != nil {
			return fmt.Errorf("input %w", err)
		}
		rels = append(rels, "inputs/"+n)
	}
	return s.pushAll(ctx, conn, root, dedupe(rels), fresh)
}

func dedupe(s []string) []string {
	seen := make(map[string]bool, len(s))
	out := s[:0]
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// hostFiles lists the regular files of inputs/ and (recursively) data/.
func hostFiles(root *os.Root) ([]string, error) {
	var rels []string
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		f, err := root.Open(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		entries, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return err
		}
		for _, e := range entries {
			rel := dir + "/" + e.Name()
			switch {
			case strings.HasPrefix(e.Name(), ".kb-"):
				// a temporary file of the workspace or of this package
			case e.Type().IsRegular():
				rels = append(rels, rel)
			case e.IsDir() && dir != "inputs" && depth < MaxDepth:
				if err := walk(rel, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, dir := range []string{"inputs", "data"} {
		if err := walk(dir, 0); err != nil {
			return nil, fmt.Errorf("list %s: %w", dir, err)
		}
	}
	return rels, nil
}

// localFile is a host file to push.
type localFile struct {
	rel  string
	size int64
	sha  string
	mode int
}

func (lf localFile) request() WriteRequest {
	return WriteRequest{Rel: lf.rel, Size: lf.size, SHA: lf.sha, Mode: lf.mode}
}

// pushAll pushes files, skipping those the remote side already has.
func (s *Syncer) pushAll(ctx context.Context, conn *jupyter.Conn, root *os.Root, rels []string, fresh bool) error {
	files := make([]localFile, 0, len(rels))
	var check []string
	for _, rel := range rels {
		lf, err := s.hashLocal(root, rel)
		if err != nil {
			return err
		}
		files = append(files, lf)
		if _, ok := s.pushed[rel]; ok || fresh {
			check = append(check, rel)
		}
	}
	skip, err := s.remoteHas(ctx, conn, files, check)
	if err != nil {
		return err
	}
	for _, lf := range files {
		if skip[lf.rel] {
			continue
		}
		if err := s.pushFile(ctx, conn, root, lf); err != nil {
			return fmt.Errorf("push %s: %w", lf.rel, err)
		}
	}
	return nil
}

// hashLocal opens a host file without following links and hashes it, unless its
// stamp shows it unchanged since it was last hashed (the executor sends every
// staged name with every call, and staging leaves unchanged inputs alone).
func (s *Syncer) hashLocal(root *os.Root, rel string) (localFile, error) {
	f, err := root.OpenFile(rel, openReadFlags, 0)
	if err != nil {
		return localFile{}, fmt.Errorf("push %s: %w", rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return localFile{}, fmt.Errorf("push %s: %w", rel, err)
	}
	if !fi.Mode().IsRegular() {
		return localFile{}, fmt.Errorf("push %s: not a regular file", rel)
	}
	if fi.Size() > s.o.MaxFileBytes {
		return localFile{}, fmt.Errorf("push %s: %d bytes is over the remote backend's limit of %d bytes per file", rel, fi.Size(), s.o.MaxFileBytes)
	}
	mode := 0o644
	if strings.HasPrefix(rel, "data/") {
		mode = 0o444
	}
	stamp, stamped := filestamp.Of(fi)
	if prev, ok := s.hashed[rel]; ok && stamped && prev.stamp == stamp {
		return localFile{rel: rel, size: fi.Size(), sha: prev.sha, mode: mode}, nil
	}
	delete(s.hashed, rel)
	start := time.Now()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, s.o.MaxFileBytes+1))
	if err != nil {
		return localFile{}, fmt.Errorf("push %s: %w", rel, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if stamped && n == fi.Size() && stamp.Settled(start) {
		s.hashed[rel] = hostHash{stamp: stamp, sha: sum}
	}
	return localFile{rel: rel, size: n, sha: sum, mode: mode}, nil
}

// remoteHas returns the files among check that the remote side already has with
// the same content: unchanged since this placement pushed them (same stat), or
// found there with the same SHA-256.
func (s *Syncer) remoteHas(ctx context.Context, conn *jupyter.Conn, files []localFile, check []string) (map[string]bool, error) {
	skip := map[string]bool{}
	if len(check) == 0 {
		return skip, nil
	}
	stats, err := s.k.Stat(ctx, conn, check)
	if err != nil {
		return nil, err
	}
	byRel := make(map[string]localFile, len(files))
	for _, lf := range files {
		byRel[lf.rel] = lf
	}
	var sum []string
	for _, rel := range check {
		st, lf := stats[rel], byRel[rel]
		if st == nil || st[0] != lf.size {
			continue
		}
		if prev, ok := s.pushed[rel]; ok && prev.sha == lf.sha && prev.stat == *st {
			skip[rel] = true
			continue
		}
		sum = append(sum, rel)
	}
	if len(sum) == 0 {
		return skip, nil
	}
	sums, err := s.k.Sums(ctx, conn, sum, s.o.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	for _, rel := range sum {
		if sum := sums[rel]; sum != nil && *sum == byRel[rel].sha {
			skip[rel] = true
			s.pushed[rel] = pushedFile{sha: *sum, stat: *stats[rel]}
		}
	}
	return skip, nil
}

// pushFile sends one file through the kernel (or the Contents API) and records it.
func (s *Syncer) pushFile(ctx context.Context, conn *jupyter.Conn, root *os.Root, lf localFile) error {
	f, err := root.OpenFile(lf.rel, openReadFlags, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var ans Written
	switch {
	case s.useContents(ctx, conn, lf):
		ans, err = s.pushContents(ctx, conn, f, lf)
	case lf.size <= int64(s.o.ChunkBytes):
		data := make([]byte, lf.size)
		if _, err = io.ReadFull(f, data); err != nil {
			return err
		}
		ans, err = s.k.WriteFile(ctx, conn, lf.request(), data)
	default:
		ans, err = s.pushChunked(ctx, conn, f, lf)
	}
	if err != nil {
		return err
	}
	if ans.SHA != lf.sha || ans.Size != lf.size {
		return fmt.Errorf("the kernel reports %d bytes with sha256 %s, want %d bytes with %s", ans.Size, ans.SHA, lf.size, lf.sha)
	}
	s.pushed[lf.rel] = pushedFile{sha: lf.sha, stat: ans.Stat}
	return nil
}

// pushChunked sends a large file in ChunkBytes pieces, Window of them in flight;
// each piece is written at its offset, so their order does not matter.
func (s *Syncer) pushChunked(ctx context.Context, conn *jupyter.Conn, f *os.File, lf localFile) (Written, error) {
	req := lf.request()
	req.SHA = ""
	h, err := s.k.BeginWrite(ctx, conn, req)
	if err != nil {
		return Written{}, err
	}
	chunk := int64(s.o.ChunkBytes)
	n := int((lf.size + chunk - 1) / chunk)
	err = s.window(ctx, n, func(ctx context.Context, i int) error {
		off := int64(i) * chunk
		buf := make([]byte, min(chunk, lf.size-off))
		if _, err := f.ReadAt(buf, off); err != nil {
			return err
		}
		return s.k.WriteChunk(ctx, conn, h, off, buf)
	})
	if err == nil {
		ans, err := s.k.EndWrite(ctx, conn, h, lf.sha)
		if err == nil {
			return ans, nil
		}
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.AbortTimeout)
	defer cancel()
	_ = s.k.Abort(actx, conn, h)
	return Written{}, err
}

// window runs fn(0..n-1) with at most Window calls in flight and returns the first
// error; after one, no further call starts and ctx is canceled for those running.
func (s *Syncer) window(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, s.o.Window)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() {
					first = err
					cancel()
				})
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
