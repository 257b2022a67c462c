package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

func sessionsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sessions", stderr)
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return exitCode{2, err.Error()}
	}
	list, err := c.Sessions(ctx)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTATE\tEXEC\tCALLS\tQUEUED\tIDLE")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", s.ID, s.State, s.ExecutionCount, s.Calls, s.Queued,
			time.Since(s.LastActivity).Round(time.Second))
	}
	return tw.Flush()
}

func resetCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return sessionAction(ctx, "reset", args, stdout, stderr)
}

func closeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return sessionAction(ctx, "close", args, stdout, stderr)
}

func sessionAction(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	fs := newFlags(name, stderr)
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return exitCode{2, fmt.Sprintf("usage: kernelbox %s [flags] SESSION", name)}
	}
	c, err := cf.client()
	if err != nil {
		return exitCode{2, err.Error()}
	}
	id := fs.Arg(0)
	if name == "reset" {
		err = c.ResetSession(ctx, id)
	} else {
		err = c.CloseSession(ctx, id)
	}
	if err != nil {
		return exitCode{1, err.Error()}
	}
	fmt.Fprintf(stdout, "%s: %s done\n", id, name)
	return nil
}
