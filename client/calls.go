package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/kernelbox/kernelbox/api"
)

// Start registers a call and returns at once with its id (a detached execute):
// the call queues and runs on the server whether or not anyone follows it.
// Follow it with [Client.Attach] or poll it with [Client.Call].
func (c *Client) Start(ctx context.Context, req api.Request) (*api.DetachedCall, error) {
	body := req.Body()
	body.Detach = true
	var d api.DetachedCall
	if err := c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(req.SessionID)+"/execute", body, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Call returns a call's state, with its Result once it is done. A call the
// server no longer keeps is an error matching api.ErrCallExpired; an unknown id
// one matching api.ErrNotFound.
func (c *Client) Call(ctx context.Context, id string) (*api.CallInfo, error) {
	var info api.CallInfo
	if err := c.do(ctx, http.MethodGet, "/v1/calls/"+url.PathEscape(id), nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// Calls lists a session's recent calls, newest first, without their Results.
func (c *Client) Calls(ctx context.Context, session string) ([]api.CallInfo, error) {
	var out struct {
		Calls []api.CallInfo `json:"calls"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(session)+"/calls", nil, &out); err != nil {
		return nil, err
	}
	return out.Calls, nil
}

// Cancel interrupts a call; its Result then says so. A call that has already
// ended is an error matching api.ErrCallFinished.
func (c *Client) Cancel(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/v1/calls/"+url.PathEscape(id)+"/cancel", nil, nil)
}
