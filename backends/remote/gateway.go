package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
)

// gateway is one server of the rotation, with its health and load.
type gateway struct {
	url    string // as configured, without a trailing slash
	name   string // redacted, for messages
	ep     jupyter.Endpoint
	client *jupyter.Client // for health checks and diagnoses
	files  *jupyter.Client // for Contents API uploads, bounded by their callers

	mu            sync.Mutex
	healthy       bool
	fails         int   // consecutive failed checks
	lastErr       error // why the last check failed; nil when healthy
	checked       time.Time
	serverKernels int // kernels the server reported at the last check
	placements    map[*Placement]struct{}
	reserved      int // picked for a session whose placement is not registered yet
}

// GatewayStatus is a snapshot of one gateway.
type GatewayStatus struct {
	// URL is the gateway's URL (without user info or query).
	URL string `json:"url"`
	// Healthy reports whether the gateway is in the rotation.
	Healthy bool `json:"healthy"`
	// Error says why the last health check failed; empty when healthy.
	Error string `json:"error,omitempty"`
	// Sessions counts the sessions placed on the gateway by this backend.
	Sessions int `json:"sessions"`
	// ServerKernels is the number of kernels the gateway reported at the last
	// check (all clients' kernels), or -1 when it does not list kernels (Kernel
	// Gateway and Enterprise Gateway refuse GET /api/kernels by default).
	ServerKernels int `json:"server_kernels"`
	// Checked is when the gateway was last checked.
	Checked time.Time `json:"checked"`
}

// ErrTokenRejected is returned (wrapped) when a gateway answers 401 or 403: the
// token is wrong or missing.
var ErrTokenRejected = errors.New("the gateway rejected the token")

// ErrNoGateway is returned (wrapped) when no gateway can take a session.
var ErrNoGateway = errors.New("no gateway is reachable")

// load is what placement compares: the kernels this backend placed there, or the
// server's count when that is higher (other clients' kernels).
func (g *gateway) load() int {
	return max(len(g.placements)+g.reserved, g.serverKernels)
}

// unreserve gives back a pick that did not become a placement.
func (g *gateway) unreserve() {
	g.mu.Lock()
	g.reserved--
	g.mu.Unlock()
}

// register turns a pick into a placement.
func (g *gateway) register(p *Placement) {
	g.mu.Lock()
	g.reserved--
	g.placements[p] = struct{}{}
	g.mu.Unlock()
}

// forget removes a closed placement from the gateway's load.
func (g *gateway) forget(p *Placement) {
	g.mu.Lock()
	delete(g.placements, p)
	g.mu.Unlock()
}

func (g *gateway) status() GatewayStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := GatewayStatus{URL: g.name, Healthy: g.healthy, Sessions: len(g.placements), ServerKernels: g.serverKernels, Checked: g.checked}
	if g.lastErr != nil {
		s.Error = g.lastErr.Error()
	}
	return s
}

// probe checks that the gateway answers GET /api and accepts the token (GET
// /api/kernels, which also gives its load). It returns the kernel count, or -1 when
// the gateway does not list kernels: Kernel Gateway and Enterprise Gateway answer
// 403 to GET /api/kernels unless listing is enabled (KG_LIST_KERNELS,
// EG_LIST_KERNELS), so a 403 there is confirmed against GET /api/kernelspecs,
// which needs the token too, before it is taken for a rejected token.
func (g *gateway) probe(ctx context.Context) (int, error) {
	if _, err := g.client.Version(ctx); err != nil {
		return 0, g.unreachable(err)
	}
	ks, err := g.client.Kernels(ctx)
	if err == nil {
		return len(ks), nil
	}
	if listingRefused(err) {
		if _, kerr := g.client.KernelSpecs(ctx); kerr == nil {
			return -1, nil
		} else if authErr := tokenError(g.name, kerr); authErr != nil {
			return 0, authErr
		}
	}
	if authErr := tokenError(g.name, err); authErr != nil {
		return 0, authErr
	}
	return 0, g.unreachable(err)
}

// listingRefused reports whether err is a 403 answer: a wrong token, or a gateway
// that does not list kernels.
func listingRefused(err error) bool {
	var he *jupyter.HTTPError
	return errors.As(err, &he) && he.StatusCode == http.StatusForbidden
}

func (g *gateway) unreachable(err error) error {
	return fmt.Errorf("gateway %s is unreachable: %w", g.name, err)
}

// tokenError returns a clear error for a 401 or 403 answer, else nil.
func tokenError(name string, err error) error {
	var he *jupyter.HTTPError
	if errors.As(err, &he) && (he.StatusCode == http.StatusUnauthorized || he.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("%w: gateway %s answered %d %s to %s %s; check --gateway-token (or KERNELBOX_GATEWAY_TOKEN)",
			ErrTokenRejected, name, he.StatusCode, http.StatusText(he.StatusCode), he.Method, he.Path)
	}
	return nil
}

// record stores a check's outcome: after after consecutive failures the gateway
// leaves the rotation, and record returns the placements to give up.
func (g *gateway) record(kernels int, err error, after int) (lost []*Placement, changed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.checked = time.Now()
	was := g.healthy
	if err == nil {
		g.fails, g.healthy, g.lastErr, g.serverKernels = 0, true, nil, kernels
		return nil, !was
	}
	g.fails++
	g.lastErr = err
	if g.fails >= after {
		g.healthy = false
	}
	if was && !g.healthy {
		for p := range g.placements {
			lost = append(lost, p)
		}
	}
	return lost, was != g.healthy
}

// check runs one health check and acts on a change.
func (b *Backend) check(ctx context.Context, g *gateway) {
	cctx, cancel := context.WithTimeout(ctx, b.opts.HealthTimeout)
	n, err := g.probe(cctx)
	cancel()
	if ctx.Err() != nil {
		return // the backend is closing: that is not the gateway's failure
	}
	b.recordCheck(g, n, err, b.opts.UnhealthyAfter)
}

// recordCheck records a check's outcome and acts on a change.
func (b *Backend) recordCheck(g *gateway, n int, err error, after int) {
	lost, changed := g.record(n, err, after)
	switch {
	case changed && err != nil:
		b.log.Warn("gateway left the rotation", "gateway", g.name, "err", err, "sessions", len(lost))
		for _, p := range lost {
			p.lose(err.Error())
		}
	case changed:
		b.log.Info("gateway is back in the rotation", "gateway", g.name)
	}
}

// watch checks g every HealthInterval until the backend closes.
func (b *Backend) watch(g *gateway) {
	defer b.wg.Done()
	t := time.NewTicker(b.opts.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-b.life.Done():
			return
		case <-t.C:
		}
		b.check(b.life, g)
	}
}
