package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
)

// The session files commands: cp, ls and rm, on the server's files API.

// side is one operand of cp: a session file (SESSION:PATH) or a local path
// ("-" for stdin or stdout).
type side struct {
	session, path string
	remote        bool
}

// parseSide reads SESSION:PATH when what is before the first ':' is a valid
// session id; anything else is a local path (so ./a:b and /x:y stay local).
func parseSide(s string) side {
	if id, p, ok := strings.Cut(s, ":"); ok && api.ValidSessionID(id) {
		return side{session: id, path: strings.TrimPrefix(p, "/"), remote: true}
	}
	return side{path: s}
}

func cpCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cp", stderr)
	var cf clientFlags
	cf.register(fs)
	noClobber := fs.Bool("n", false, "do not overwrite files in the session")
	fs.intro = "Usage: kernelbox cp [flags] SRC DST\n\nOne side is SESSION:PATH (relative to the session directory), the other a local path\nor - for stdin/stdout. Directories are copied recursively. An upload creates the session."
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return exitCode{2, ""}
	}
	src, dst := parseSide(fs.Arg(0)), parseSide(fs.Arg(1))
	if src.remote == dst.remote {
		return exitCode{2, "cp: exactly one of SRC and DST must be SESSION:PATH"}
	}
	c, err := cf.client()
	if err != nil {
		return exitCode{2, err.Error()}
	}
	cp := copier{c: c, stdout: stdout, stderr: stderr, noClobber: *noClobber}
	if dst.remote {
		err = cp.upload(ctx, src.path, dst)
	} else {
		err = cp.download(ctx, src, dst.path)
	}
	if err != nil {
		return exitCode{1, err.Error()}
	}
	return nil
}

type copier struct {
	c         *client.Client
	stdout    io.Writer
	stderr    io.Writer
	noClobber bool
}

// upload copies the local file or directory src (or stdin) to dst. A
// destination that is empty or ends in '/' is a directory to copy into.
func (cp copier) upload(ctx context.Context, src string, dst side) error {
	into := dst.path == "" || strings.HasSuffix(dst.path, "/")
	target := strings.TrimSuffix(dst.path, "/")
	opts := &client.UploadOptions{NoOverwrite: cp.noClobber}
	if src == "-" {
		if into {
			return errors.New("cp: give the file's name in the session to copy stdin to")
		}
		_, err := cp.c.Upload(ctx, dst.session, target, os.Stdin, opts)
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if into {
		target = path.Join(target, filepath.Base(filepath.Clean(src)))
	}
	if !fi.IsDir() {
		return cp.uploadFile(ctx, src, dst.session, target, opts)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			fmt.Fprintf(cp.stderr, "kernelbox cp: skipped %s: a %s, not a regular file\n", p, d.Type())
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		return cp.uploadFile(ctx, p, dst.session, path.Join(target, filepath.ToSlash(rel)), opts)
	})
}

func (cp copier) uploadFile(ctx context.Context, local, session, remote string, opts *client.UploadOptions) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := cp.c.Upload(ctx, session, remote, f, opts); err != nil {
		return fmt.Errorf("%s -> %s:%s: %w", local, session, remote, err)
	}
	return nil
}

// download copies the session file or directory src to dst (or stdout). An
// existing local directory is copied into.
func (cp copier) download(ctx context.Context, src side, dst string) error {
	if dst == "-" {
		_, err := cp.c.Download(ctx, src.session, src.path, cp.stdout)
		return err
	}
	isDir := src.path == ""
	if !isDir {
		// Try it as a file first: most copies are one file.
		err := cp.downloadFile(ctx, src.session, src.path, dst, true)
		if !errors.Is(err, api.ErrIsDirectory) {
			return err
		}
	}
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() && src.path != "" {
		dst = filepath.Join(dst, path.Base(src.path))
	}
	return cp.downloadDir(ctx, src.session, strings.TrimSuffix(src.path, "/"), dst)
}

func (cp copier) downloadDir(ctx context.Context, session, dir, local string) error {
	l, err := cp.c.List(ctx, session, dir, 0)
	if err != nil {
		return err
	}
	if l.Truncated {
		return fmt.Errorf("%s:%s holds more entries than one listing returns; copy its subdirectories one by one", session, dir)
	}
	if err := os.MkdirAll(local, 0o755); err != nil {
		return err
	}
	for _, e := range l.Entries {
		rp := path.Join(dir, e.Name)
		lp := filepath.Join(local, e.Name)
		switch e.Type {
		case "dir":
			err = cp.downloadDir(ctx, session, rp, lp)
		case "file":
			err = cp.downloadFile(ctx, session, rp, lp, false)
		default:
			fmt.Fprintf(cp.stderr, "kernelbox cp: skipped %s:%s: a %s, not a regular file\n", session, rp, e.Type)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// downloadFile writes the session file remote to local (into it when local is
// an existing directory and intoDir is set), through a temporary name, so that
// a failed download leaves no partial file.
func (cp copier) downloadFile(ctx context.Context, session, remote, local string, intoDir bool) error {
	if fi, err := os.Stat(local); intoDir && err == nil && fi.IsDir() {
		local = filepath.Join(local, path.Base(remote))
	}
	tmp, err := os.CreateTemp(filepath.Dir(local), ".kernelbox-cp-*")
	if err != nil {
		return err
	}
	_, err = cp.c.Download(ctx, session, remote, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), local)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

func lsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ls", stderr)
	var cf clientFlags
	cf.register(fs)
	max := fs.Int("max", 0, "list at most this many entries (default: the server's, 10000)")
	fs.intro = "Usage: kernelbox ls [flags] SESSION[:DIR]"
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitCode{2, ""}
	}
	id, dir, _ := strings.Cut(fs.Arg(0), ":")
	c, err := cf.client()
	if err != nil {
		return exitCode{2, err.Error()}
	}
	l, err := c.List(ctx, id, strings.Trim(dir, "/"), *max)
	if err != nil {
		return exitCode{1, err.Error()}
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tSIZE\tMODIFIED\tNAME")
	for _, e := range l.Entries {
		name := e.Name
		if e.Type == "dir" {
			name += "/"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", e.Type, e.Size, e.ModTime.Local().Format(time.DateTime), name)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if l.Truncated {
		fmt.Fprintf(stderr, "kernelbox ls: listing truncated after %d entries\n", len(l.Entries))
	}
	return nil
}

func rmCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("rm", stderr)
	var cf clientFlags
	cf.register(fs)
	recursive := fs.Bool("r", false, "remove a directory and everything in it")
	fs.intro = "Usage: kernelbox rm [flags] SESSION:PATH"
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitCode{2, ""}
	}
	s := parseSide(fs.Arg(0))
	if !s.remote || s.path == "" {
		return exitCode{2, "rm: give SESSION:PATH"}
	}
	c, err := cf.client()
	if err != nil {
		return exitCode{2, err.Error()}
	}
	if err := c.Remove(ctx, s.session, strings.TrimSuffix(s.path, "/"), *recursive); err != nil {
		return exitCode{1, err.Error()}
	}
	return nil
}
