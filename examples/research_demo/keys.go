package main

// One key per agent (docs/security.md, "Scoped tokens"): the lab serves its
// executor over HTTP on a loopback port, the coordinator holds the admin token,
// and the data_analyst gets a scoped token for its own session only; its tool
// calls go through that key, so a prompt-injected analyst could not reach any
// other session, mint a key or read the metrics. Every call lands in the audit
// log.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/audit"
	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/tokens"
	"github.com/kernelbox/kernelbox/workspace"
)

// keys is the lab's HTTP server and the analyst's scoped key.
type keys struct {
	srv     *http.Server
	store   *tokens.Store
	log     *audit.Log
	admin   *client.Client // the coordinator's
	analyst *client.Client // the data_analyst's: its session only
	tokenID string
}

// serveKeys serves e on a loopback port and mints the analyst's key for
// session (template tmpl, execute only, one session).
func serveKeys(ctx context.Context, e *executor.Executor, ws *workspace.Manager, root, session, tmpl string) (*keys, error) {
	state := filepath.Join(root, "state")
	st, err := tokens.Open(state, tokens.Options{Exists: func(id string) bool { _, err := e.Session(id); return err == nil }})
	if err != nil {
		return nil, err
	}
	al, err := audit.Open(filepath.Join(state, "audit.log"), audit.Options{})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = st.Close()
		_ = al.Close()
		return nil, err
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	admin := hex.EncodeToString(b[:]) // the coordinator's admin token, in this process only
	k := &keys{store: st, log: al}
	k.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: httpapi.New(e, httpapi.Options{
		Token: admin, Hosts: httpapi.Hosts{Loopback: true}, Workspace: ws, Tokens: st, Audit: al})}
	go func() { _ = k.srv.Serve(ln) }()
	url := "http://" + ln.Addr().String()
	if k.admin, err = client.New(url, &client.Options{Token: admin}); err != nil {
		k.close()
		return nil, err
	}
	ct, err := k.admin.CreateToken(ctx, api.CreateTokenBody{Name: "data_analyst", TTLSeconds: 3600, TokenScope: api.TokenScope{
		Sessions: []string{session}, Templates: []string{tmpl}, Ops: []string{string(tokens.OpExecute)}, MaxSessions: 1}})
	if err != nil {
		k.close()
		return nil, fmt.Errorf("mint the analyst's key: %w", err)
	}
	k.tokenID = ct.ID
	if k.analyst, err = client.New(url, &client.Options{Token: ct.Token}); err != nil {
		k.close()
		return nil, err
	}
	return k, nil
}

// check shows what the analyst's key reaches: its session, and nothing the
// admin keeps.
func (k *keys) check(ctx context.Context) string {
	list, err := k.analyst.Sessions(ctx)
	if err != nil {
		return "cannot list its sessions: " + err.Error()
	}
	_, err = k.analyst.CreateToken(ctx, api.CreateTokenBody{Name: "wider", TokenScope: api.TokenScope{Sessions: []string{"*"}}})
	minted := "refused"
	if !errors.Is(err, api.ErrDenied) {
		minted = fmt.Sprintf("NOT refused (%v)", err)
	}
	return fmt.Sprintf("scoped token %s, session %s only, ops execute (sees %d session; minting a key: %s); the coordinator keeps the admin token",
		k.tokenID, strings.Join(sessionIDs(list), ","), len(list), minted)
}

func sessionIDs(list []api.SessionInfo) []string {
	ids := make([]string, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	return ids
}

// close revokes the analyst's key and stops the server.
func (k *keys) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if k.admin != nil && k.tokenID != "" {
		_ = k.admin.RevokeToken(ctx, k.tokenID)
	}
	if k.srv != nil {
		_ = k.srv.Shutdown(ctx)
	}
	_ = k.store.Close()
	_ = k.log.Close()
}

// keyTool is the sandbox_execute tool over HTTP with the analyst's key.
type keyTool struct {
	c       *client.Client
	timeout time.Duration
}

var _ tool = (*keyTool)(nil)

func (t *keyTool) execute(ctx context.Context, args toolArgs) (*api.Result, error) {
	return t.c.Execute(ctx, api.Request{SessionID: args.SessionID, Code: args.Code, Inputs: args.Inputs, Timeout: t.timeout})
}
