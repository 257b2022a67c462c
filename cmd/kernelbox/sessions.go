package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/internal/capacity"
)

// clientCmd parses a client command's flags (the server's address and token) and
// connects its client.
func clientCmd(name string, args []string, stderr io.Writer) (*flag.FlagSet, *client.Client, error) {
	fs := newFlags(name, stderr)
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return nil, nil, err
	}
	c, err := cf.client()
	if err != nil {
		return nil, nil, exitCode{2, err.Error()}
	}
	return fs.FlagSet, c, nil
}

func sessionsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	_, c, err := clientCmd("sessions", args, stderr)
	if err != nil {
		return err
	}
	list, err := c.Sessions(ctx)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tTEMPLATE\tSTATE\tEXEC\tCALLS\tQUEUED\tIDLE")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", s.ID, s.Template, s.State, s.ExecutionCount, s.Calls, s.Queued,
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
	fs, c, err := clientCmd(name, args, stderr)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return exitCode{2, fmt.Sprintf("usage: kernelbox %s [flags] SESSION", name)}
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

// templatesCmd lists a server's templates.
func templatesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	_, c, err := clientCmd("templates", args, stderr)
	if err != nil {
		return err
	}
	list, err := c.Templates(ctx)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TEMPLATE\tKERNEL\tMEMORY\tCPUS\tPRELOAD\tWARM\tSESSIONS\tDESCRIPTION")
	for _, t := range list {
		mem := "-"
		if t.MemoryBytes > 0 {
			mem = capacity.FormatBytes(t.MemoryBytes)
		}
		cpus := "-"
		if t.CPUs > 0 {
			cpus = strconv.FormatFloat(t.CPUs, 'g', -1, 64)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%d/%d\t%d\t%s\n", t.Name, t.Kernel, mem, cpus, t.Preload, t.WarmReady, t.Warm, t.Sessions, t.Description)
	}
	return tw.Flush()
}
