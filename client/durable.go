package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/kernelbox/kernelbox/api"
)

// Hibernate saves a session's namespace to a snapshot and stops its kernel; its
// next call (or Resume) restores it. An error matches api.ErrCannotHibernate or
// api.ErrSnapshotTooLarge when the session could not be saved whole (it stays
// live).
func (c *Client) Hibernate(ctx context.Context, id string) (*api.SessionInfo, error) {
	var info api.SessionInfo
	if err := c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/hibernate", struct{}{}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// Resume starts a hibernated session's kernel and restores its namespace now.
func (c *Client) Resume(ctx context.Context, id string) (*api.ResumeResult, error) {
	var res api.ResumeResult
	if err := c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/resume", struct{}{}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Fork makes session newID a copy of session id (template, files, namespace); the
// original keeps running.
func (c *Client) Fork(ctx context.Context, id, newID string) (*api.ResumeResult, error) {
	var res api.ResumeResult
	if err := c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/fork", api.ForkRequest{ID: newID}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
