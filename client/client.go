// Package client is a Go client for `kernelbox serve`: the same Request and Result
// wire types (package api) as the executor, over HTTP (TCP or a unix socket). Start reading at [New] and
// [Client.Execute]; [Client.ExecuteStream] delivers output as it happens.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/runtimefile"
)

// Options configures a Client. The zero value works.
type Options struct {
	// Token is sent as a bearer token. Defaults to the token a `kernelbox serve`
	// run by the same user recorded for this server URL (see [TokenFor]).
	Token string
	// HTTPClient, when set, is used instead of one built for the server address.
	HTTPClient *http.Client
}

// Client talks to one kernelbox server. It is safe for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New returns a client for server: an http(s) URL such as "http://127.0.0.1:8700", or
// "unix:/path/to/socket".
func New(server string, opts *Options) (*Client, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	c := &Client{token: o.Token, http: o.HTTPClient}
	if sock, ok := strings.CutPrefix(server, "unix:"); ok {
		if sock == "" {
			return nil, errors.New("client: empty unix socket path")
		}
		c.base = "http://kernelbox"
		if c.http == nil {
			c.http = &http.Client{Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "unix", sock)
				},
			}}
		}
	} else {
		u, err := url.Parse(server)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("client: server %q is not an http(s) URL or unix:PATH", server)
		}
		c.base = strings.TrimSuffix(server, "/")
		if c.token == "" {
			c.token = TokenFor(server)
		}
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	return c, nil
}

// APIError is an error answer from the server. errors.Is matches it against the
// sentinel errors of package api, which are also the executor's (api.ErrDenied, ...).
type APIError struct {
	StatusCode int
	Code       api.Code
	Message    string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("kernelbox: %s (%d): %s", e.Code, e.StatusCode, e.Message)
}

// Is reports whether the server's error code corresponds to target.
func (e *APIError) Is(target error) bool {
	sentinel := api.ErrorOf(e.Code)
	return sentinel != nil && sentinel == target
}

// Execute runs code in a session and returns the result. Cell errors, timeouts and
// kernel deaths are results; the error is for calls that could not run.
func (c *Client) Execute(ctx context.Context, req api.Request) (*api.Result, error) {
	var res api.Result
	if err := c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(req.SessionID)+"/execute", req.Body(), &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Sessions lists the server's live sessions.
func (c *Client) Sessions(ctx context.Context) ([]api.SessionInfo, error) {
	var out struct {
		Sessions []api.SessionInfo `json:"sessions"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/sessions", nil, &out); err != nil {
		return nil, err
	}
	return out.Sessions, nil
}

// CreateSession creates session id with a template ("" is the server's default)
// before its first call. A session that exists with that template is returned as it
// is; one with another template is an error matching api.ErrTemplateMismatch.
func (c *Client) CreateSession(ctx context.Context, id, template string) (*api.SessionInfo, error) {
	var info api.SessionInfo
	if err := c.do(ctx, http.MethodPost, "/v1/sessions", api.CreateSessionBody{ID: id, Template: template}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// Templates lists the server's templates with their effective settings.
func (c *Client) Templates(ctx context.Context) ([]api.TemplateInfo, error) {
	var out struct {
		Templates []api.TemplateInfo `json:"templates"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/templates", nil, &out); err != nil {
		return nil, err
	}
	return out.Templates, nil
}

// CloseSession stops a session's kernel and deletes its files (artifacts stay).
func (c *Client) CloseSession(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(id), nil, nil)
}

// ResetSession gives a session a fresh kernel, keeping its files.
func (c *Client) ResetSession(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/reset", nil, nil)
}

// Interrupt interrupts a session's running call.
func (c *Client) Interrupt(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/interrupt", nil, nil)
}

// Artifacts lists a session's artifacts.
func (c *Client) Artifacts(ctx context.Context, id string) ([]api.Artifact, error) {
	var out struct {
		Artifacts []api.Artifact `json:"artifacts"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id)+"/artifacts", nil, &out); err != nil {
		return nil, err
	}
	return out.Artifacts, nil
}

// DownloadArtifact writes one artifact (name relative to the session's artifacts
// directory, slash-separated) to w.
func (c *Client) DownloadArtifact(ctx context.Context, session, name string, w io.Writer) error {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	resp, err := c.send(ctx, http.MethodGet, "/v1/artifacts/"+url.PathEscape(session)+"/"+strings.Join(parts, "/"), nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

// Health returns the server's health report.
func (c *Client) Health(ctx context.Context) (*api.Health, error) {
	var h api.Health
	resp, err := c.send(ctx, http.MethodGet, "/healthz", nil, "")
	if err != nil {
		var ae *APIError
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable {
			return nil, err
		}
		h.Status, h.Problem = "degraded", ae.Message
		return &h, nil
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return nil, err
	}
	return &h, nil
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.send(ctx, method, path, in, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("kernelbox: decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

// send performs a request and turns non-2xx answers into *APIError.
func (c *Client) send(ctx context.Context, method, path string, in any, accept string) (*http.Response, error) {
	return c.sendHeaders(ctx, method, path, in, accept, nil)
}

// sendHeaders is send with extra request headers.
func (c *Client) sendHeaders(ctx context.Context, method, path string, in any, accept string, hdr map[string]string) (*http.Response, error) {
	var rd io.Reader
	all := map[string]string{}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
		all["Content-Type"] = "application/json"
	}
	if accept != "" {
		all["Accept"] = accept
	}
	for k, v := range hdr {
		all[k] = v
	}
	return c.sendReader(ctx, method, path, rd, all)
}

// sendReader performs a request with body as it is and turns non-2xx answers
// into *APIError.
func (c *Client) sendReader(ctx context.Context, method, path string, body io.Reader, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kernelbox: %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var eb api.ErrorBody
		if json.Unmarshal(raw, &eb) == nil && eb.Error.Code != "" {
			return nil, &APIError{StatusCode: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
		}
		return nil, &APIError{StatusCode: resp.StatusCode, Code: "http", Message: strings.TrimSpace(string(raw))}
	}
	return resp, nil
}

// TokenFor returns the token a `kernelbox serve` without --token, run by the same
// user, generated for the server at url and keeps in its 0600 runtime file
// ($XDG_RUNTIME_DIR/kernelbox or ~/.local/share/kernelbox/runtime), or "" when
// there is none (no such server alive, or another user's).
func TokenFor(url string) string { return runtimefile.Lookup(url) }
