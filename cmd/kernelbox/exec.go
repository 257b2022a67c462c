package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/executor"
)

// clientFlags are the flags of commands that talk to a running server.
type clientFlags struct {
	server string
	token  string
}

func (c *clientFlags) register(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&c.server, "server", envOr("KERNELBOX_SERVER", "http://127.0.0.1:8700"), "kernelbox server: URL or unix:PATH (also KERNELBOX_SERVER)")
	fs.StringVar(&c.token, "token", os.Getenv("KERNELBOX_TOKEN"), "bearer token (also KERNELBOX_TOKEN)")
}

func (c *clientFlags) client() (*client.Client, error) {
	return client.New(c.server, &client.Options{Token: c.token})
}

func execCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("exec", stderr)
	var cf clientFlags
	cf.register(fs)
	session := fs.String("session", "default", "session id (calls with the same id share state)")
	template := fs.String("template", "", "template a new session is created with (see kernelbox templates); a session keeps its own")
	code := fs.String("c", "", "code to run (else read from FILE, or from stdin with -)")
	timeout := fs.Duration("timeout", 0, "call timeout: the code's run only (default: the server's)")
	maxWait := fs.Duration("max-wait", 0, "bound on the whole call (queue, kernel start, run); a call that cannot start in time does not run")
	asJSON := fs.Bool("json", false, "print the final Result as JSON instead of streaming output")
	detach := fs.Bool("detach", false, "start the call and print its id at once (JSON with --json); follow it with kernelbox attach ID")
	var inputs multiFlag
	fs.Var(&inputs, "input", "host file to stage as inputs/<basename> (repeatable)")
	fs.intro = "Usage: kernelbox exec [flags] (-c CODE | FILE | -)"
	if err := parse(fs, args); err != nil {
		return err
	}
	src, err := readCode(*code, fs.Args())
	if err != nil {
		return exitCode{2, err.Error()}
	}
	// The server resolves relative paths against its own directory: send absolute ones.
	for i, in := range inputs {
		if abs, err := filepath.Abs(in); err == nil {
			inputs[i] = abs
		}
	}
	c, err := cf.client()
	if err != nil {
		return exitCode{2, err.Error()}
	}
	req := api.Request{SessionID: *session, Code: src, Inputs: inputs, Template: *template, Timeout: *timeout, MaxWait: *maxWait}
	if *detach {
		return startDetached(ctx, c, req, *asJSON, stdout)
	}
	var res *api.Result
	if *asJSON {
		res, err = c.Execute(ctx, req)
	} else {
		res, err = c.ExecuteStream(ctx, req, func(ev api.Event) { printEvent(ev, stdout, stderr) })
	}
	if err != nil {
		return exitCode{2, err.Error()}
	}
	return finishExec(res, *asJSON, stdout, stderr)
}

// startDetached starts req as a detached call and prints its id.
func startDetached(ctx context.Context, c *client.Client, req api.Request, asJSON bool, stdout io.Writer) error {
	d, err := c.Start(ctx, req)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	}
	fmt.Fprintln(stdout, d.CallID)
	return nil
}

// readCode takes the code from -c, a file argument, or stdin ("-").
func readCode(code string, args []string) (string, error) {
	switch {
	case code != "" && len(args) > 0:
		return "", fmt.Errorf("give code with -c or as a FILE, not both")
	case code != "":
		return code, nil
	case len(args) == 1 && args[0] == "-":
		b, err := io.ReadAll(os.Stdin)
		return string(b), err
	case len(args) == 1:
		b, err := os.ReadFile(args[0])
		return string(b), err
	default:
		return "", fmt.Errorf("no code: use -c CODE, FILE, or - for stdin")
	}
}

// printEvent prints streamed output as it arrives: stdout to stdout, stderr to
// stderr, values and errors as text.
func printEvent(ev api.Event, stdout, stderr io.Writer) {
	switch ev.Type {
	case "stream":
		if ev.Name == "stderr" {
			fmt.Fprint(stderr, ev.Text)
		} else {
			fmt.Fprint(stdout, ev.Text)
		}
	case "result", "display":
		if ev.Output == nil {
			return
		}
		if text, ok := plainText(ev.Output); ok {
			fmt.Fprintln(stdout, text)
		} else {
			var kinds []string
			for k := range ev.Output.Data {
				kinds = append(kinds, k)
			}
			fmt.Fprintf(stdout, "[display: %s]\n", strings.Join(kinds, ", "))
		}
	case "error":
		if ev.Output != nil {
			for _, l := range ev.Output.Traceback {
				fmt.Fprintln(stderr, executor.StripANSI(l))
			}
		}
	}
}

func plainText(o *api.Output) (string, bool) {
	raw, ok := o.Data["text/plain"]
	if !ok {
		return "", false
	}
	s, err := api.MultilineString(raw)
	return s, err == nil
}

// printSummary prints what the stream did not show: non-ok statuses, truncation,
// state loss and artifacts.
func printSummary(r *api.Result, stderr io.Writer) {
	if r.Status != api.StatusOK && r.Status != api.StatusError && r.Error != nil {
		fmt.Fprintf(stderr, "[%s] %s\n", r.Status, r.Error.Evalue)
	}
	if r.StateLost {
		fmt.Fprintln(stderr, "[state lost] the session's variables were reset")
	}
	if r.Truncated {
		fmt.Fprintf(stderr, "[truncated] %s\n", r.TruncationNote)
	}
	for _, a := range r.Artifacts {
		fmt.Fprintf(stderr, "[artifact] %s (%d bytes, %s)\n", a.Path, a.Size, a.MIME)
	}
}
