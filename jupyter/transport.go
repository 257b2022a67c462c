package jupyter

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// dialer returns the function every HTTP and WebSocket connection of an endpoint is
// made with: a unix socket when the endpoint names one, else TCP with TCP_QUICKACK
// re-armed before each read (Linux), which keeps the kernel from delaying ACKs of small
// replies by ~40 ms.
func (ep Endpoint) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if dial := ep.Dial; dial != nil {
		return func(ctx context.Context, _, _ string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, d.Timeout)
			defer cancel()
			return dial(ctx)
		}
	}
	if ep.Socket != "" {
		sock := ep.Socket
		return func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", sock)
		}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
			return newQuickAckConn(tc), nil
		}
		return c, nil
	}
}

// baseURL parses the endpoint's URL, defaulting to http://localhost for sockets.
func (ep Endpoint) baseURL() (*url.URL, error) {
	raw := ep.URL
	if raw == "" {
		if ep.Socket == "" && ep.Dial == nil {
			return nil, fmt.Errorf("endpoint has neither a URL nor a socket")
		}
		raw = "http://localhost"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("endpoint url %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("endpoint url %q: scheme must be http or https", raw)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("endpoint url %q: no host", raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// transport builds the HTTP transport for the endpoint's REST calls.
func (ep Endpoint) transport() *http.Transport {
	return &http.Transport{
		DialContext:         ep.dialer(),
		TLSClientConfig:     ep.TLS,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}
}

// authHeader returns the headers that authenticate a request to the endpoint.
func (ep Endpoint) authHeader() http.Header {
	h := http.Header{}
	if ep.Token != "" {
		h.Set("Authorization", "token "+ep.Token)
	}
	return h
}
