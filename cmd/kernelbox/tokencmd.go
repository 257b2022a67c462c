package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/audit"
)

// tokenCmd is `kernelbox token create|list|revoke` (docs/security.md): the
// admin token's routes for scoped tokens.
func tokenCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return exitCode{2, "usage: kernelbox token create|list|revoke [flags]"}
	}
	switch args[0] {
	case "create":
		return tokenCreate(ctx, args[1:], stdout, stderr)
	case "list":
		return tokenList(ctx, args[1:], stdout, stderr)
	case "revoke":
		fs, c, err := clientCmd("token revoke", args[1:], stderr)
		if err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return exitCode{2, "usage: kernelbox token revoke [flags] TOKEN_ID"}
		}
		if err := c.RevokeToken(ctx, fs.Arg(0)); err != nil {
			return exitCode{1, err.Error()}
		}
		fmt.Fprintf(stdout, "%s: revoked\n", fs.Arg(0))
		return nil
	}
	return exitCode{2, fmt.Sprintf("kernelbox token: unknown subcommand %q (create, list, revoke)", args[0])}
}

// tokenCreate mints a scoped token and prints its secret (alone on stdout,
// for `TOKEN=$(kernelbox token create ...)`; --json prints the whole answer).
func tokenCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("token create", stderr)
	var cf clientFlags
	cf.register(fs)
	name := fs.String("name", "", "the token's name, shown in listings and the audit log (required)")
	sessions := fs.String("sessions", "", "comma list of session ids, prefixes ending in * (a1-*), or * (required)")
	templates := fs.String("templates", "", "comma list of templates its new sessions may use (default: any)")
	ops := fs.String("ops", "", "comma list of watch, execute, files, hibernate, fork, close (default: all; watch alone: read only)")
	maxSessions := fs.Int("max-sessions", 0, "most sessions it may own, live and hibernated (0: the server's limit only)")
	rate := fs.Int("rate-per-minute", 0, "most calls a minute (0: no limit)")
	ttl := fs.Duration("ttl", 0, "time to live (0: until revoked)")
	asJSON := fs.Bool("json", false, "print the whole answer as JSON (id, scope, secret)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *name == "" || *sessions == "" {
		return exitCode{2, "kernelbox token create: --name and --sessions are required"}
	}
	c, err := cf.client()
	if err != nil {
		return exitCode{2, err.Error()}
	}
	body := api.CreateTokenBody{Name: *name, TTLSeconds: int64(ttl.Seconds()), TokenScope: api.TokenScope{
		Sessions: commaList(*sessions), Templates: commaList(*templates), Ops: commaList(*ops), MaxSessions: *maxSessions, RatePerMinute: *rate}}
	ct, err := c.CreateToken(ctx, body)
	if err != nil {
		return exitCode{1, err.Error()}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(ct)
	}
	fmt.Fprintln(stdout, ct.Token)
	fmt.Fprintf(stderr, "token %s (%s) created; its secret, above, is shown only this once\n", ct.ID, ct.Name)
	return nil
}

func tokenList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	_, c, err := clientCmd("token list", args, stderr)
	if err != nil {
		return err
	}
	list, err := c.Tokens(ctx)
	if err != nil {
		return exitCode{1, err.Error()}
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSESSIONS\tOPS\tOWNS\tEXPIRES\tLAST USED")
	for _, t := range list {
		exp, used := "never", "never"
		if !t.Expires.IsZero() {
			exp = t.Expires.Local().Format(time.DateTime)
		}
		if !t.LastUsed.IsZero() {
			used = t.LastUsed.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", t.ID, t.Name, strings.Join(t.Scope.Sessions, ","), strings.Join(t.Scope.Ops, ","), t.Sessions, exp, used)
	}
	return tw.Flush()
}

// commaList splits a comma list, dropping empty items.
func commaList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// auditCmd prints the audit log's lines that match its filters, oldest first,
// as JSON lines (or a table with --table).
func auditCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit", stderr)
	fs.intro = "Usage: kernelbox audit [flags]\n\nPrints the audit log of the serve on --workspace (or --file), filtered."
	ws := fs.String("workspace", envOr("KERNELBOX_WORKSPACE", defaultWorkspace()), "the serve's workspace (its log is WORKSPACE/state/audit.log)")
	file := fs.String("file", "", "the audit log file (default: the workspace's)")
	token := fs.String("token", "", "only this token's lines (id or name)")
	session := fs.String("session", "", "only this session's lines")
	refused := fs.Bool("refused", false, "only refusals")
	since := fs.Duration("since", 0, "only the lines of the last DURATION")
	table := fs.Bool("table", false, "print a table instead of JSON lines")
	if err := parse(fs, args); err != nil {
		return err
	}
	path := *file
	if path == "" {
		p, err := auditPath(*ws)
		if err != nil {
			return exitCode{2, err.Error()}
		}
		path = p
	}
	f, err := os.Open(path)
	if err != nil {
		return exitCode{1, err.Error()}
	}
	defer f.Close()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if *table {
		fmt.Fprintln(tw, "TIME\tTOKEN\tROUTE\tSESSION\tOUTCOME\tSTATUS")
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r audit.Record
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue
		}
		switch {
		case *token != "" && r.TokenID != *token && r.TokenName != *token,
			*session != "" && r.Session != *session,
			*refused && r.Outcome != "refused",
			*since > 0 && time.Since(r.Time) > *since:
			continue
		}
		if *table {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", r.Time.Local().Format(time.DateTime), r.TokenName, r.Route, r.Session, r.Outcome, r.Status)
		} else {
			fmt.Fprintln(stdout, sc.Text())
		}
	}
	if *table {
		return tw.Flush()
	}
	return sc.Err()
}
