package remote

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/kernelfs"
)

// Defaults for the zero values of Options; those of Options.Sync are kernelfs's.
const (
	DefaultHealthInterval = 5 * time.Second
	DefaultHealthTimeout  = 5 * time.Second
	DefaultUnhealthyAfter = 2
)

// maxChunkBytes is the largest Sync.ChunkBytes: the kernel's WebSocket limits
// messages to 10 MiB by default, and base64 adds a third.
const maxChunkBytes = 6 << 20

// Gateway is one Jupyter server sessions may be placed on: a Jupyter Server, a
// Kernel Gateway or an Enterprise Gateway.
type Gateway struct {
	// URL is the server's base URL, http or https, with an optional path prefix
	// ("https://eg.example.com/gateway"). A query or user info is rejected: the
	// token goes in Token.
	URL string

	// Token is sent as "Authorization: token <Token>". Empty sends none.
	Token string
}

// Transfer selects how files move between the host and the kernel.
type Transfer int

const (
	// TransferAuto moves files through the kernel (chunked base64 over execute
	// requests), which works with every gateway. It is the default because it
	// measured faster than the Contents API: a 50 MB input at 45-50 MB/s against
	// 24-29 MB/s on loopback (kernelfs.BenchmarkTransfer), and it needs no shared file
	// system.
	TransferAuto Transfer = iota
	// TransferKernel always moves files through the kernel.
	TransferKernel
	// TransferContents uploads inputs with the Contents API (PUT
	// /api/contents/<path>, base64, in chunks) when the server offers it and its
	// kernels see the files it writes (checked once per session with a probe
	// file), and falls back to the kernel otherwise. Outputs are always pulled
	// through the kernel. Only Jupyter Server offers the Contents API.
	TransferContents
)

// String returns "auto", "kernel" or "contents".
func (t Transfer) String() string {
	switch t {
	case TransferKernel:
		return "kernel"
	case TransferContents:
		return "contents"
	default:
		return "auto"
	}
}

// ParseTransfer parses "auto", "kernel" or "contents".
func ParseTransfer(s string) (Transfer, error) {
	switch s {
	case "", "auto":
		return TransferAuto, nil
	case "kernel":
		return TransferKernel, nil
	case "contents":
		return TransferContents, nil
	}
	return 0, fmt.Errorf("transfer %q: want auto, kernel or contents", s)
}

// Options configures the remote backend. Gateways is required; every other zero
// value means the documented default.
type Options struct {
	// Gateways lists the servers to place sessions on. Each new session goes to the
	// reachable gateway with the fewest kernels.
	Gateways []Gateway

	// KernelName is the kernelspec to start. Defaults to the server's default.
	// New checks that every reachable gateway offers it.
	KernelName string

	// KernelPath is the kernel's starting directory relative to the server's root
	// ("path" of POST /api/kernels; Jupyter Server honours it, the gateways ignore
	// it). Defaults to the root.
	KernelPath string

	// KernelEnv is sent in the kernel start request's "env". Enterprise Gateway
	// reads KERNEL_* variables from it (KERNEL_USERNAME, KERNEL_NAMESPACE,
	// KERNEL_IMAGE, ...); Jupyter Server ignores it.
	KernelEnv map[string]string

	// CACertFile is a PEM file of certificate authorities to trust for https
	// gateways, in addition to the system's.
	CACertFile string

	// TLS is the TLS configuration for https gateways. Defaults to Go's defaults
	// (with CACertFile's authorities added when set).
	TLS *tls.Config

	// HealthInterval is how often each gateway is checked (GET /api, and GET
	// /api/kernels for its load). A gateway that fails UnhealthyAfter checks in a
	// row leaves the rotation, and its sessions' connections are closed, so that
	// their next call starts a fresh kernel elsewhere and reports state_lost.
	// Defaults to 5 seconds.
	HealthInterval time.Duration

	// HealthTimeout bounds one check. Defaults to 5 seconds.
	HealthTimeout time.Duration

	// UnhealthyAfter is how many consecutive checks must fail before a gateway
	// leaves the rotation; one slow answer from a busy server is not enough.
	// A gateway that does not answer when New checks it starts out of the
	// rotation at once. Defaults to 2.
	UnhealthyAfter int

	// Sync configures how each session's files move through its kernel
	// (kernelfs): the remote working directories (RemoteDir, each session's
	// <RemoteDir>/<session id>-<128 random bits in hex>, new and empty for each
	// incarnation of the session, removed by a kernel that is shut down) and how
	// long an abandoned one lives (ReapAfter), the limits on files (MaxFileBytes:
	// an output over it is skipped with a note, an input over it fails the call;
	// MaxOutputFiles), each session's byte budget for the files API when the
	// workspace has no disk quota (MaxSessionBytes: a gateway's disk has no quota
	// of kernelbox's), and the transfer's pieces (ChunkBytes, at most 6 MiB,
	// PullChunkBytes, Window). Each zero value means kernelfs's default;
	// AbortTimeout defaults to HealthTimeout. KernelPath, Uploader and Logger are
	// the backend's: it sets them from KernelPath, Transfer and Logger.
	Sync kernelfs.Options

	// Transfer selects how inputs reach the kernel. Defaults to TransferAuto.
	Transfer Transfer

	// StateFile, when set, is where the backend keeps what taking its sessions'
	// kernels back after a restart of kernelbox needs (keep.go): the next backend
	// with the same StateFile takes them back (Reattach) when the gateway still
	// has them. It never holds a token. Defaults to "": nothing is kept.
	StateFile string

	// Logger receives the backend's logs. Defaults to discarding them.
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.HealthInterval <= 0 {
		o.HealthInterval = DefaultHealthInterval
	}
	if o.HealthTimeout <= 0 {
		o.HealthTimeout = DefaultHealthTimeout
	}
	if o.UnhealthyAfter <= 0 {
		o.UnhealthyAfter = DefaultUnhealthyAfter
	}
	// Sync goes to kernelfs as it is, which applies its defaults, but for the
	// fields the backend sets (syncOptions).
	if o.Sync.AbortTimeout <= 0 {
		o.Sync.AbortTimeout = o.HealthTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// validate checks what can be checked without the network.
func (o *Options) validate() error {
	if len(o.Gateways) == 0 {
		return errors.New("no gateway: give at least one URL (--gateway)")
	}
	seen := map[string]bool{}
	for _, g := range o.Gateways {
		if err := checkURL(g.URL); err != nil {
			return err
		}
		key := strings.TrimSuffix(g.URL, "/")
		if seen[key] {
			return fmt.Errorf("gateway %s is listed twice", redact(g.URL))
		}
		seen[key] = true
	}
	for k, v := range o.KernelEnv {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("kernel env %q: want a name without '=' or NUL, and a value without NUL", k)
		}
	}
	if strings.ContainsRune(o.Sync.RemoteDir, 0) {
		return errors.New("remote dir contains NUL")
	}
	if o.Sync.ChunkBytes > maxChunkBytes {
		return fmt.Errorf("chunk size %d: at most 6 MiB, or the kernel's WebSocket (10 MiB messages) refuses it", o.Sync.ChunkBytes)
	}
	return nil
}

// checkURL says what is wrong with a gateway URL, in terms a user can act on.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("gateway URL %q: %w (want http://HOST:PORT[/PREFIX] or https://…)", redact(raw), errors.Unwrap(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("gateway URL %q: want http:// or https://", redact(raw))
	case u.Host == "":
		return fmt.Errorf("gateway URL %q: no host", raw)
	case u.User != nil:
		return fmt.Errorf("gateway URL %q: no user info, please: pass the token with --gateway-token", redact(raw))
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("gateway URL %q: no query or fragment, please (a token goes in --gateway-token)", redact(raw))
	}
	if _, err := url.Parse(u.Scheme + "://" + u.Host); err != nil {
		return fmt.Errorf("gateway URL %q: %w", raw, err)
	}
	return nil
}

// redact returns a URL without user info or query, for messages and logs.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.IndexAny(raw, "?#"); i >= 0 {
			raw = raw[:i]
		}
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			raw = raw[i+1:]
		}
		return raw
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return strings.TrimSuffix(u.String(), "/")
}

// tlsConfig returns the TLS configuration for https gateways.
func (o *Options) tlsConfig() (*tls.Config, error) {
	if o.CACertFile == "" {
		return o.TLS, nil
	}
	pem, err := os.ReadFile(o.CACertFile)
	if err != nil {
		return nil, fmt.Errorf("gateway CA file: %w", err)
	}
	var cfg *tls.Config
	if o.TLS != nil {
		cfg = o.TLS.Clone()
	} else {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	pool := cfg.RootCAs
	if pool == nil {
		if pool, err = x509.SystemCertPool(); err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
	} else {
		pool = pool.Clone()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("gateway CA file %s: no PEM certificate in it", o.CACertFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}
