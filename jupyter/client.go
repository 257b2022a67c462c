package jupyter

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// ClientOptions configures a Client. The zero value works.
type ClientOptions struct {
	// Timeout bounds each REST call that has no earlier context deadline.
	// Defaults to 60 seconds (starting a kernel can take a while on a loaded host).
	Timeout time.Duration

	// Logger receives debug logs. Defaults to discarding them.
	Logger *slog.Logger
}

// Client talks to one Jupyter server's REST API and opens kernel WebSockets.
// It is safe for concurrent use. It holds idle HTTP connections; call CloseIdle when
// done with a server that will keep running.
type Client struct {
	ep      Endpoint
	base    *url.URL
	http    *http.Client
	tr      *http.Transport
	timeout time.Duration
	log     *slog.Logger
}

// NewClient returns a client for the server at ep. It does not contact the server.
func NewClient(ep Endpoint, opts *ClientOptions) (*Client, error) {
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	base, err := ep.baseURL()
	if err != nil {
		return nil, err
	}
	tr := ep.transport()
	return &Client{
		ep:      ep,
		base:    base,
		http:    &http.Client{Transport: tr},
		tr:      tr,
		timeout: o.Timeout,
		log:     o.Logger,
	}, nil
}

// Endpoint returns the endpoint the client was made for.
func (c *Client) Endpoint() Endpoint { return c.ep }

// CloseIdle closes idle keep-alive connections to the server.
func (c *Client) CloseIdle() { c.tr.CloseIdleConnections() }

// Kernel describes a running kernel, as GET /api/kernels/{id} returns it.
type Kernel struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	LastActivity   string `json:"last_activity"`
	ExecutionState string `json:"execution_state"`
	Connections    int    `json:"connections"`
}

// KernelSpec is one kernelspec as GET /api/kernelspecs returns it.
type KernelSpec struct {
	Name string `json:"name"`
	Spec struct {
		Argv          []string          `json:"argv"`
		Env           map[string]string `json:"env"`
		DisplayName   string            `json:"display_name"`
		Language      string            `json:"language"`
		InterruptMode string            `json:"interrupt_mode"`
	} `json:"spec"`
}

// KernelSpecs is the answer of GET /api/kernelspecs.
type KernelSpecs struct {
	Default     string                `json:"default"`
	KernelSpecs map[string]KernelSpec `json:"kernelspecs"`
}

// StartOptions says which kernel to start and where.
type StartOptions struct {
	// Name is the kernelspec name; empty means the server's default.
	Name string
	// Path is the kernel's working directory relative to the server's root
	// directory; empty means the root.
	Path string
	// Env is passed in the request's "env" field; Enterprise Gateway reads KERNEL_*
	// variables from it. Jupyter Server ignores it.
	Env map[string]string
}

// Version returns the server's version (GET /api).
func (c *Client) Version(ctx context.Context) (string, error) {
	var v struct {
		Version string `json:"version"`
	}
	if err := c.do(ctx, http.MethodGet, "/api", nil, http.StatusOK, &v); err != nil {
		return "", err
	}
	return v.Version, nil
}

// KernelSpecs lists the server's kernelspecs.
func (c *Client) KernelSpecs(ctx context.Context) (*KernelSpecs, error) {
	var ks KernelSpecs
	if err := c.do(ctx, http.MethodGet, "/api/kernelspecs", nil, http.StatusOK, &ks); err != nil {
		return nil, err
	}
	return &ks, nil
}

// StartKernel starts a kernel and returns it once the server reports it started.
func (c *Client) StartKernel(ctx context.Context, opts StartOptions) (*Kernel, error) {
	body := map[string]any{}
	if opts.Name != "" {
		body["name"] = opts.Name
	}
	if opts.Path != "" {
		body["path"] = opts.Path
	}
	if len(opts.Env) > 0 {
		body["env"] = opts.Env
	}
	var k Kernel
	if err := c.do(ctx, http.MethodPost, "/api/kernels", body, http.StatusCreated, &k); err != nil {
		return nil, fmt.Errorf("start kernel: %w", err)
	}
	if k.ID == "" {
		return nil, fmt.Errorf("start kernel: server returned no kernel id")
	}
	return &k, nil
}

// Kernel returns one kernel's state; the error wraps ErrNotFound when the server does
// not know the id.
func (c *Client) Kernel(ctx context.Context, id string) (*Kernel, error) {
	var k Kernel
	if err := c.do(ctx, http.MethodGet, "/api/kernels/"+url.PathEscape(id), nil, http.StatusOK, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// Kernels lists the server's running kernels.
func (c *Client) Kernels(ctx context.Context) ([]Kernel, error) {
	var ks []Kernel
	if err := c.do(ctx, http.MethodGet, "/api/kernels", nil, http.StatusOK, &ks); err != nil {
		return nil, err
	}
	return ks, nil
}

// Interrupt interrupts the kernel (SIGINT for signal-mode kernels).
func (c *Client) Interrupt(ctx context.Context, id string) error {
	if err := c.do(ctx, http.MethodPost, "/api/kernels/"+url.PathEscape(id)+"/interrupt", nil, http.StatusNoContent, nil); err != nil {
		return fmt.Errorf("interrupt kernel: %w", err)
	}
	return nil
}

// Restart restarts the kernel under the same id; all its state is lost.
func (c *Client) Restart(ctx context.Context, id string) (*Kernel, error) {
	var k Kernel
	if err := c.do(ctx, http.MethodPost, "/api/kernels/"+url.PathEscape(id)+"/restart", nil, http.StatusOK, &k); err != nil {
		return nil, fmt.Errorf("restart kernel: %w", err)
	}
	return &k, nil
}

// Shutdown stops the kernel. A kernel that is already gone is not an error.
func (c *Client) Shutdown(ctx context.Context, id string) error {
	err := c.do(ctx, http.MethodDelete, "/api/kernels/"+url.PathEscape(id), nil, http.StatusNoContent, nil)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("shut down kernel: %w", err)
	}
	return nil
}

// SaveFile writes data to a file through the Contents API (PUT /api/contents/{path},
// base64): path is relative to the server's root directory. chunk 0 writes the whole
// file; otherwise data is one piece of a chunked upload (Jupyter Server's
// LargeFileManager): chunk 1 starts the file, 2, 3, ... append, and -1 appends the
// last piece.
func (c *Client) SaveFile(ctx context.Context, path string, data []byte, chunk int) error {
	model := map[string]any{"type": "file", "format": "base64", "content": base64.StdEncoding.EncodeToString(data)}
	if chunk != 0 {
		model["chunk"] = chunk
	}
	if err := c.do(ctx, http.MethodPut, "/api/contents/"+strings.TrimPrefix(path, "/"), model, http.StatusCreated, nil); err != nil {
		return fmt.Errorf("save file: %w", err)
	}
	return nil
}

// do performs one REST call, decoding a JSON answer into out when out is non-nil.
func (c *Client) do(ctx context.Context, method, path string, in any, want int, out any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	u := *c.base
	u.Path = c.base.Path + path
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	req.Header = c.ep.authHeader()
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if !accepted(want, resp.StatusCode) {
		return httpError(method, path, resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// accepted reports whether a response status answers a call that wants want. A 200
// also answers a call that wants 204 (servers differ on DELETE) or 201 (the Contents
// API creates a file with 201 and overwrites or appends to one with 200).
func accepted(want, got int) bool {
	return got == want || got == http.StatusOK && (want == http.StatusNoContent || want == http.StatusCreated)
}

// Jupyter Server answers errors outside its REST API (the channels WebSocket among
// them) with an HTML page: its heading and any traceback are the message.
var (
	htmlHeading   = regexp.MustCompile(`(?s)<h1[^>]*>(.*?)</h1>`)
	htmlTraceback = regexp.MustCompile(`(?s)<pre class="traceback">(.*?)</pre>`)
)

// htmlErrorText returns the text of an HTML error page, or "" for other bodies.
func htmlErrorText(raw []byte) string {
	h := htmlHeading.FindSubmatch(raw)
	if h == nil {
		return ""
	}
	parts := []string{strings.Join(strings.Fields(html.UnescapeString(string(h[1]))), " ")}
	if tb := htmlTraceback.FindSubmatch(raw); tb != nil {
		parts = append(parts, strings.TrimSpace(html.UnescapeString(string(tb[1]))))
	}
	return strings.Join(parts, ": ")
}

func httpError(method, path string, resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &HTTPError{Method: method, Path: path, StatusCode: resp.StatusCode}
	var j struct {
		Message string `json:"message"`
		Reason  string `json:"reason"`
	}
	if json.Unmarshal(raw, &j) == nil && (j.Message != "" || j.Reason != "") {
		e.Message = strings.TrimSpace(j.Message + " " + j.Reason)
	} else if m := htmlErrorText(raw); m != "" {
		e.Message = m
	} else {
		e.Message = strings.TrimSpace(string(raw))
		if len(e.Message) > 300 {
			e.Message = e.Message[:300] + "…"
		}
	}
	return e
}
