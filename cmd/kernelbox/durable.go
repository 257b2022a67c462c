package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/kernelbox/kernelbox/api"
)

// hibernateCmd saves a session's namespace and stops its kernel.
func hibernateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c, err := clientCmd("hibernate", args, stderr)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return exitCode{2, "usage: kernelbox hibernate [flags] SESSION"}
	}
	info, err := c.Hibernate(ctx, fs.Arg(0))
	if err != nil {
		return exitCode{1, err.Error()}
	}
	fmt.Fprintf(stdout, "%s: %s", info.ID, info.State)
	if sn := info.Snapshot; sn != nil {
		fmt.Fprintf(stdout, ", snapshot %d bytes in %d ms: %s", sn.Bytes, sn.TookMS, strings.Join(sn.Names, ", "))
		fmt.Fprint(stdout, skippedText(sn.Skipped))
	}
	fmt.Fprintln(stdout)
	return nil
}

// resumeCmd restores a hibernated session now.
func resumeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c, err := clientCmd("resume", args, stderr)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return exitCode{2, "usage: kernelbox resume [flags] SESSION"}
	}
	res, err := c.Resume(ctx, fs.Arg(0))
	if err != nil {
		return exitCode{1, err.Error()}
	}
	printResumed(stdout, res)
	return nil
}

// forkCmd copies a session into a new one.
func forkCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c, err := clientCmd("fork", args, stderr)
	if err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return exitCode{2, "usage: kernelbox fork [flags] SESSION NEW_SESSION"}
	}
	res, err := c.Fork(ctx, fs.Arg(0), fs.Arg(1))
	if err != nil {
		return exitCode{1, err.Error()}
	}
	printResumed(stdout, res)
	return nil
}

func printResumed(w io.Writer, res *api.ResumeResult) {
	switch {
	case !res.Resumed:
		fmt.Fprintf(w, "%s: not hibernated (%s); nothing to resume\n", res.Session.ID, res.Session.State)
	case res.StateLost:
		fmt.Fprintf(w, "%s: %s; state lost: %s\n", res.Session.ID, res.Session.State, res.Reason)
	case res.StateRestored != nil:
		r := res.StateRestored
		fmt.Fprintf(w, "%s: %s; restored from %s in %d ms: %s%s\n", res.Session.ID, res.Session.State, r.From, r.TookMS,
			strings.Join(r.Restored, ", "), skippedText(r.NotRestored))
	}
}

// skippedText lists names that are not (or will not be) restored, with why.
func skippedText(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	names := make([]string, 0, len(m))
	for n, why := range m {
		names = append(names, n+" ("+why+")")
	}
	sort.Strings(names)
	return "; not restored: " + strings.Join(names, "; ")
}
