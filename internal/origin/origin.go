// Package origin holds the one rule for a browser's WebSocket upgrade, used by
// httpapi's guard (every route) and by the Jupyter gateway's upgrader (package
// jupyterapi), so that the two cannot drift apart. Start reading at [Same].
package origin

import (
	"net/http"
	"net/url"
	"strings"
)

// Same admits a request without an Origin (not a browser) or with one Origin, http
// or https, naming the Host it was sent to; never one a browser marks
// Sec-Fetch-Site: cross-site, nor a "null" Origin.
func Same(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return false
	}
	origin := r.Header.Values("Origin")
	if len(origin) == 0 {
		return true
	}
	u, err := url.Parse(origin[0])
	if err != nil || len(origin) > 1 || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}
