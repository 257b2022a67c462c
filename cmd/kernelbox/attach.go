package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
)

// callFlags bound the server's registry of calls (serve and mcp).
type callFlags struct {
	retention        time.Duration
	maxCalls         int
	logBytes         int64
	totalLogBytes    int64
	resultBytes      int64
	totalResultBytes int64
}

func (c *callFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&c.retention, "call-retention", time.Hour, "keep a finished call (its events and Result) this long for kernelbox attach, GET /v1/calls/ID and get_call")
	fs.IntVar(&c.maxCalls, "max-calls", 1000, "keep at most this many finished calls (the oldest go first)")
	fs.Int64Var(&c.logBytes, "call-log-bytes", 16<<20, "bytes of events kept per call for replay; past it the oldest events are dropped, and readers told so")
	fs.Int64Var(&c.totalLogBytes, "total-call-log-bytes", 256<<20, "bytes of events kept for replay by all calls together; past it the oldest finished calls' logs are emptied")
	fs.Int64Var(&c.resultBytes, "call-result-bytes", 64<<20, "bytes of its Result a finished call keeps; a Result over it is kept without its big display data (saved ones stay as artifacts), then with its longest texts cut, and says so")
	fs.Int64Var(&c.totalResultBytes, "total-call-result-bytes", 128<<20, "bytes of Results kept by all finished calls together; past it the oldest keep only their status, artifacts and a note")
}

// options returns the registry options the flags describe.
func (c *callFlags) options(log *slog.Logger) calls.Options {
	return calls.Options{
		Retention: c.retention, MaxCalls: c.maxCalls, MaxLogBytes: c.logBytes, MaxTotalLogBytes: c.totalLogBytes,
		MaxResultBytes: c.resultBytes, MaxTotalResultBytes: c.totalResultBytes, Logger: log,
	}
}

func attachCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("attach", stderr)
	var cf clientFlags
	cf.register(fs)
	asJSON := fs.Bool("json", false, "print the final Result as JSON instead of the call's output")
	fs.intro = "Usage: kernelbox attach [flags] CALL_ID\n\nPrints a call's output from its start (every byte once, in order, reconnecting if the\nconnection drops), then its result, like exec. The call id comes from `kernelbox exec --detach`,\nthe Kernelbox-Call-Id header or GET /v1/sessions/ID/calls."
	// Flags may come after the call id too.
	var id string
	for len(args) > 0 {
		if err := parse(fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		if id != "" {
			return exitCode{2, "attach takes one CALL_ID"}
		}
		id, args = fs.Arg(0), fs.Args()[1:]
	}
	if id == "" {
		fs.Usage()
		return exitCode{2, "attach needs a CALL_ID"}
	}
	c, err := cf.client()
	if err != nil {
		return exitCode{2, err.Error()}
	}
	onEvent := func(ev api.Event) { printCallEvent(ev, stdout, stderr) }
	if *asJSON {
		onEvent = nil
	}
	res, err := c.Attach(ctx, id, onEvent)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	return finishExec(res, *asJSON, stdout, stderr)
}

// printCallEvent prints an event of a followed call: output as exec does, and a
// note for output the server's log no longer held.
func printCallEvent(ev api.Event, stdout, stderr io.Writer) {
	if t := ev.Truncation; ev.Type == "truncated" && t != nil {
		fmt.Fprintf(stderr, "[truncated] %d events (%d bytes) of this call's output were dropped from the server's log before they could be replayed (events %d-%d); the Result below has the output the call kept\n",
			t.Events, t.Bytes, t.From, t.To)
		return
	}
	printEvent(ev, stdout, stderr)
}

// finishExec prints a finished call's Result (as JSON, or the summary after
// streamed output) and turns its status into the exit code.
func finishExec(res *api.Result, asJSON bool, stdout, stderr io.Writer) error {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
	} else {
		printSummary(res, stderr)
	}
	if res.Status != api.StatusOK {
		return exitCode{1, ""}
	}
	return nil
}
