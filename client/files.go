package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kernelbox/kernelbox/api"
)

// UploadOptions configures [Client.Upload]. The zero value overwrites.
type UploadOptions struct {
	// NoOverwrite refuses (api.ErrExists) when something is at the path already.
	NoOverwrite bool
}

// filePath is the URL path of a session file: each element escaped on its
// own, so a name holding '%', '?' or bytes that are not UTF-8 arrives intact.
func filePath(session, p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return "/v1/sessions/" + url.PathEscape(session) + "/files/" + strings.Join(parts, "/")
}

// Upload writes what r yields to path (relative to the session directory; parent
// directories are made) and returns the bytes written. The body streams: its
// size is bounded by the server's per-file limit (api.ErrTooLarge) and the
// session's disk quota (api.ErrQuota), not by memory. A session that does not
// exist yet is created, as Execute does. The file appears under its name only
// once complete.
func (c *Client) Upload(ctx context.Context, session, path string, r io.Reader, opts *UploadOptions) (int64, error) {
	hdr := map[string]string{"Content-Type": "application/octet-stream"}
	if opts != nil && opts.NoOverwrite {
		hdr["If-None-Match"] = "*"
	}
	resp, err := c.sendReader(ctx, http.MethodPut, filePath(session, path), r, hdr)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var w api.FileWritten
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil {
		return 0, fmt.Errorf("kernelbox: decode answer of upload %q: %w", path, err)
	}
	return w.Size, nil
}

// Download writes the session file at path to w and returns its size. A
// directory is api.ErrIsDirectory, a symbolic link, FIFO or device
// api.ErrInvalidPath, a missing file or session api.ErrNotFound.
func (c *Client) Download(ctx context.Context, session, path string, w io.Writer) (int64, error) {
	resp, err := c.send(ctx, http.MethodGet, filePath(session, path), nil, "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// List lists the directory at dir of a session ("" for the session directory):
// at most max entries (0: the server's default), Truncated when there are more.
func (c *Client) List(ctx context.Context, session, dir string, max int) (*api.FileListing, error) {
	q := url.Values{}
	if dir != "" {
		q.Set("path", dir)
	}
	if max > 0 {
		q.Set("max", strconv.Itoa(max))
	}
	p := "/v1/sessions/" + url.PathEscape(session) + "/files"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var l api.FileListing
	if err := c.do(ctx, http.MethodGet, p, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// Remove deletes the session file at path; a directory only with recursive
// (otherwise api.ErrIsDirectory).
func (c *Client) Remove(ctx context.Context, session, path string, recursive bool) error {
	p := filePath(session, path)
	if recursive {
		p += "?recursive=1"
	}
	return c.do(ctx, http.MethodDelete, p, nil, nil)
}

// Batch sends several uploads and downloads in one request. Each file has its
// own result (api.FileResult.Status "ok" or an error code); the error is for a
// request that failed as a whole (the session, the body's size).
func (c *Client) Batch(ctx context.Context, session string, b api.FileBatch) (*api.FileBatchResult, error) {
	var res api.FileBatchResult
	if err := c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(session)+"/files:batch", b, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
