package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/kernelbox/kernelbox/api"
)

// CreateToken mints a scoped token (admin token only): its secret is in the
// answer's Token, shown this once. See docs/security.md.
func (c *Client) CreateToken(ctx context.Context, body api.CreateTokenBody) (*api.CreatedToken, error) {
	var out api.CreatedToken
	if err := c.do(ctx, http.MethodPost, "/v1/tokens", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tokens lists the scoped tokens, without their secrets (admin token only).
func (c *Client) Tokens(ctx context.Context) ([]api.TokenInfo, error) {
	var out struct {
		Tokens []api.TokenInfo `json:"tokens"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/tokens", nil, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// RevokeToken revokes a scoped token at once (admin token only): its open
// calls and WebSockets end. An unknown id matches api.ErrNotFound.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(id), nil, nil)
}

// WhoAmI says which token the client holds: the admin's or a scoped one,
// with its scope.
func (c *Client) WhoAmI(ctx context.Context) (*api.WhoAmI, error) {
	var out api.WhoAmI
	if err := c.do(ctx, http.MethodGet, "/v1/token", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
