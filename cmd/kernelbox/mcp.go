package main

import (
	"log/slog"
	"net/http"
)

// mountMCP serves MCP over streamable HTTP at /mcp.
func mountMCP(mux *http.ServeMux, en *engine, token string, log *slog.Logger) {}
