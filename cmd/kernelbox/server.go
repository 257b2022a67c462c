package main

import (
	"log/slog"
	"time"

	"github.com/kernelbox/kernelbox/calls"
)

// serverFlags are the flags of the commands that serve clients (serve and mcp):
// the bounds of the calls registry and the MCP answer budgets. run serves no
// client and registers neither.
type serverFlags struct {
	calls callFlags // attach.go
	mcp   mcpFlags  // mcp.go
}

// register adds the "Calls" and "MCP" groups.
func (s *serverFlags) register(fs *flagSet) {
	fs.add("Calls", s.calls.register)
	fs.add("MCP", s.mcp.register)
}

// serve gives en what serving clients takes: the calls registry, shared by the
// HTTP API and MCP (closed by en.close), and the MCP options. timeout is the
// engine's default per-call timeout.
func (s *serverFlags) serve(en *engine, timeout time.Duration, log *slog.Logger) {
	co := s.calls.options(log)
	co.Journal = en.journal
	en.calls = calls.New(en.exec, co)
	en.mcp = s.mcp.options(timeout, log)
	en.mcp.Calls = en.calls
}

// registerServer adds the groups serve and mcp share, in the order -h prints
// them: the engine's, the sessions', the calls' and MCP's. Each command adds its
// own after, then the backends' (ef.backends.register).
func registerServer(fs *flagSet, ef *engineFlags, sf *serverFlags) {
	fs.add("Engine", ef.register)
	fs.add("Sessions", ef.pool.register)
	sf.register(fs)
}
