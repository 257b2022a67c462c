package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/dashboard"
)

// dashboardFlags say whether `kernelbox serve` serves the dashboard page.
type dashboardFlags struct {
	off bool
}

// register adds --no-dashboard to serve's flags.
func (d *dashboardFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&d.off, "no-dashboard", false, "do not serve the dashboard web page at / (the HTTP API is unchanged)")
}

// dashboardHandler is the dashboard, which serve mounts at GET / (exactly) and
// under dashboard.AssetPrefix of the HTTP API (httpapi.Options.Dashboard), or nil
// with --no-dashboard. The page and its assets carry no data and need no token
// (the route table exempts them); everything the page shows comes from the API,
// behind the token.
func dashboardHandler(d *dashboardFlags, log *slog.Logger) http.Handler {
	if d.off {
		return nil
	}
	return dashboard.New(dashboard.Options{Logger: log})
}

// dashboardCmd prints the dashboard's URL with the token in its fragment
// (http://HOST:PORT/#token=...), which logs a browser in: the page takes the token
// into the tab's sessionStorage and removes the fragment. A fragment is never sent
// to the server, so the token is in no request line or access log. The token is
// --token (KERNELBOX_TOKEN) or the one a `kernelbox serve` run by this user keeps in
// its runtime file; serve itself never prints it (its output ends up in logs).
func dashboardCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dashboard", stderr)
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return exitCode{2, "dashboard takes no arguments: " + strings.Join(fs.Args(), " ")}
	}
	if strings.HasPrefix(cf.server, "unix:") {
		return exitCode{2, "the dashboard is for a browser: give --server the http:// URL of a TCP listener"}
	}
	token := cf.token
	if token == "" {
		token = client.TokenFor(cf.server)
	}
	c, err := client.New(cf.server, &client.Options{Token: token})
	if err != nil {
		return exitCode{2, err.Error()}
	}
	// Check the token before handing it out, so that the link works.
	if _, err := c.Sessions(ctx); err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && ae.StatusCode == http.StatusUnauthorized && token == "" {
			return exitCode{1, fmt.Sprintf("no token for %s: no `kernelbox serve` of this user keeps one for that URL (give --token, or the URL serve printed)", cf.server)}
		}
		return exitCode{1, err.Error()}
	}
	u := strings.TrimSuffix(cf.server, "/") + "/"
	if err := servesDashboard(ctx, u, token); err != nil {
		return exitCode{1, err.Error()}
	}
	if token != "" {
		u += "#token=" + url.QueryEscape(token)
	}
	fmt.Fprintln(stdout, u)
	return nil
}

// servesDashboard checks that the server at u (its root URL) serves the dashboard
// page, so that a link to a server started with --no-dashboard is not handed out.
// The page shell needs no token; the token is sent so that a server without the
// page answers 404 rather than refusing the request.
func servesDashboard(ctx context.Context, u, token string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("dashboard page: %w", err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s serves no dashboard (it was started with --no-dashboard); its HTTP API works without it", u)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("dashboard page %s: %s", u, resp.Status)
	}
	return nil
}
