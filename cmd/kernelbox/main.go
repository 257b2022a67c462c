// Command kernelbox runs agents' Python code in stateful Jupyter kernels: as an HTTP
// and MCP server (serve, mcp), as a client of such a server (exec, sessions, reset),
// as a notebook runner (run), and with tools to set it up (doctor, image build).
//
// Run `kernelbox help` for the commands; each takes -h.
//
// Where to start reading: run.go lists the commands. backends.go is the backend
// table, the one place that knows the backends: each row has the backend's flags,
// its limits (the caps on templates), its capacity planning, its constructor and
// its doctor check, and every command, the templates loader, doctor and the
// benchmark read it. flags.go groups a command's flags under headings; each
// command registers only the groups it uses (serve_flags.go, server.go,
// engine.go). engine.go builds the executor from them. The benchmark's harness is
// the package ./bench.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		var ec exitCode
		if errors.As(err, &ec) {
			if ec.msg != "" {
				fmt.Fprintln(os.Stderr, "kernelbox:", unprefixed(ec.msg))
			}
			os.Exit(ec.code)
		}
		fmt.Fprintln(os.Stderr, "kernelbox:", unprefixed(err.Error()))
		os.Exit(2)
	}
}

// unprefixed drops the "kernelbox: " the client's errors start with, which main
// prints itself, also where a command wrapped such an error in its own context
// ("SRC -> DST: kernelbox: ...").
func unprefixed(msg string) string {
	return strings.ReplaceAll(strings.TrimPrefix(msg, "kernelbox: "), ": kernelbox: ", ": ")
}

// exitCode ends the process with a code, printing msg when it is not empty.
type exitCode struct {
	code int
	msg  string
}

func (e exitCode) Error() string { return fmt.Sprintf("exit %d: %s", e.code, e.msg) }
