package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/audit"
	"github.com/kernelbox/kernelbox/mcpserver"
	"github.com/kernelbox/kernelbox/tokens"
)

// mcpFlags are the MCP answer budgets, shared by serve (/mcp) and mcp (stdio).
type mcpFlags struct {
	maxText  int
	maxImage int
}

func (m *mcpFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&m.maxText, "mcp-max-text", envInt("KERNELBOX_MCP_MAX_TEXT", 20_000), "MCP: bytes of text per tool answer; longer output loses its middle, with a note (also KERNELBOX_MCP_MAX_TEXT)")
	fs.IntVar(&m.maxImage, "mcp-max-image", envInt("KERNELBOX_MCP_MAX_IMAGE", 256<<10), "MCP: bytes of images returned inline per answer; larger ones are returned as artifact links (also KERNELBOX_MCP_MAX_IMAGE)")
}

// options returns the MCP server options the flags describe; timeout is the
// engine's default per-call timeout.
func (m *mcpFlags) options(timeout time.Duration, log *slog.Logger) mcpserver.Options {
	return mcpserver.Options{
		MaxTextBytes:   m.maxText,
		MaxImageBytes:  m.maxImage,
		DefaultTimeout: timeout,
		Logger:         log,
	}
}

// mcpFlagSet returns the flags of `kernelbox mcp`: serve's, without the HTTP
// server's own.
func mcpFlagSet(stderr io.Writer) (*flagSet, *engineFlags, *serverFlags) {
	fs := newFlags("mcp", stderr)
	fs.intro = "Usage: kernelbox mcp [flags]\n\nServes MCP over stdio (stdin/stdout), for Claude Desktop, Claude Code or any MCP client.\nLogs go to stderr."
	ef, sf := newEngineFlags("none"), &serverFlags{}
	registerServer(fs, ef, sf)
	ef.backends.register(fs)
	return fs, ef, sf
}

func mcpCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, ef, sf := mcpFlagSet(stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return exitCode{2, "mcp takes no arguments: " + strings.Join(fs.Args(), " ")}
	}
	// stdout carries the protocol: everything else goes to stderr.
	log, err := ef.logger(stderr)
	if err != nil {
		return exitCode{2, err.Error()}
	}
	// No approver: stdin is the protocol, so a policy "ask" is denied (fail closed).
	en, err := ef.build(ctx, log, nil)
	if err != nil {
		return err
	}
	sf.serve(en, ef.timeout, log)
	defer func() {
		if err := en.close(); err != nil {
			log.Warn("shutdown", "err", err)
		}
	}()
	if !en.kind.runsCode {
		log.Warn("backend none: execute_code will refuse every call; pass --backend docker (or local, unsandboxed)")
	}
	log.Info("kernelbox mcp: serving MCP on stdio", "backend", en.exec.Backend(), "workspace", en.ws.Root(), "artifacts", en.ws.ArtifactsDir())
	srv := mcpserver.New(en.exec, en.ws, en.mcp)
	err = srv.Run(ctx, &mcp.IOTransport{Reader: os.Stdin, Writer: nopWriteCloser{stdout}})
	if err != nil && ctx.Err() == nil && !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

// mcpHandler is MCP over streamable HTTP, which serve mounts at /mcp of the HTTP
// API (httpapi.Options.MCP): behind the API's guard (Host, token, cross-site
// requests), like every route.
func mcpHandler(en *engine, log *slog.Logger, st *tokens.Store, al *audit.Log) http.Handler {
	o := en.mcp
	o.Tokens, o.Audit = st, al
	srv := mcpserver.New(en.exec, en.ws, o)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Logger: log,
		// Clients that vanish without DELETE must not pin sessions forever.
		SessionTimeout: time.Hour,
	})
	return mcpserver.WithPrincipal(h)
}

// nopWriteCloser lets the command's stdout be a transport's writer without the
// transport closing it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}
