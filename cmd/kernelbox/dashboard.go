package main

import (
	"flag"
	"log/slog"
	"net/http"

	"github.com/kernelbox/kernelbox/dashboard"
)

// dashboardFlags say whether `kernelbox serve` serves the dashboard page.
type dashboardFlags struct {
	off bool
}

// registerDashboard adds --no-dashboard to serve's flags.
func registerDashboard(fs *flag.FlagSet) *dashboardFlags {
	d := &dashboardFlags{}
	fs.BoolVar(&d.off, "no-dashboard", false, "do not serve the dashboard web page at / (the HTTP API is unchanged)")
	return d
}

// mountDashboard serves the dashboard page at GET / (exactly) and its assets under
// dashboard.AssetPrefix, next to the HTTP API mounted at "/": every other path
// (/v1/..., /healthz, /mcp, /metrics, unknown ones) keeps its handler. The page
// and its assets carry no data and need no token; everything the page shows comes
// from the API, behind the token.
func mountDashboard(mux *http.ServeMux, d *dashboardFlags, log *slog.Logger) {
	if d.off {
		return
	}
	h := dashboard.New(dashboard.Options{Logger: log})
	mux.Handle("GET /{$}", h)
	mux.Handle("GET "+dashboard.AssetPrefix, h)
}
