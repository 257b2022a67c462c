package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

// command is one subcommand.
type command struct {
	name  string
	usage string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "run the HTTP API (and MCP over HTTP at /mcp)", serveCmd},
		{"mcp", "serve MCP over stdio, for Claude Desktop, Claude Code and other MCP clients", mcpCmd},
		{"exec", "run code on a kernelbox server and print its output", execCmd},
		{"attach", "print a call's output from its start and its result (calls outlive connections)", attachCmd},
		{"run", "run a notebook's cells in a local kernel and write the executed .ipynb (papermill-style -p parameters)", runNotebookCmd},
		{"sessions", "list a server's sessions", sessionsCmd},
		{"templates", "list a server's session templates", templatesCmd},
		{"cp", "copy files to or from a session: kernelbox cp SRC DST, one side SESSION:PATH, - for stdin/stdout", cpCmd},
		{"ls", "list a session's files: kernelbox ls SESSION[:DIR]", lsCmd},
		{"rm", "delete a session's file: kernelbox rm [-r] SESSION:PATH", rmCmd},
		{"dashboard", "print the dashboard's URL with a login token in its #fragment (for this user's serve)", dashboardCmd},
		{"reset", "give a session a fresh kernel (variables gone, files kept)", resetCmd},
		{"close", "close a session (kernel stopped, files deleted, artifacts kept)", closeCmd},
		{"hibernate", "save a session's variables to its directory and stop its kernel (its next call restores them)", hibernateCmd},
		{"resume", "restore a hibernated session's variables in a new kernel now", resumeCmd},
		{"fork", "copy a session (files and variables) into a new one: kernelbox fork SESSION NEW_SESSION", forkCmd},
		{"token", "mint, list and revoke scoped tokens (admin token): kernelbox token create|list|revoke", tokenCmd},
		{"audit", "print the audit log of a serve (filters: --token, --session, --refused, --since)", auditCmd},
		{"doctor", "check Python, Jupyter, Docker and the kernel image; say what to install", doctorCmd},
		{"bench", "measure kernelbox against direct-ZMQ and plain-copy references, interleaved", benchCmd},
		{"image", "build the docker backend's kernel image: kernelbox image build [--force] [--image NAME]", imageCmd},
	}
}

// run dispatches to a subcommand.
func run(ctx context.Context, args []string) error {
	return dispatch(ctx, args, os.Stdout, os.Stderr)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	usage(stderr)
	return exitCode{2, fmt.Sprintf("unknown command %q", args[0])}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "kernelbox: stateful Jupyter kernels for AI agents")
	fmt.Fprintln(w, "\nUsage: kernelbox COMMAND [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(w, "\nRun `kernelbox COMMAND -h` for a command's flags.")
}
