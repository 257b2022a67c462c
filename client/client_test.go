package client_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// newServer serves a local-backend executor over httptest with a token and returns a
// client for it, the server's URL and the policy's working directory.
func newServer(t *testing.T) (*client.Client, string, string) {
	t.Helper()
	te := testexec.Local(t, nil)
	srv := httptest.NewServer(httpapi.New(te.Exec, httpapi.Options{Token: "secret", Workspace: te.WS}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, &client.Options{Token: "secret"})
	require.NoError(t, err)
	return c, srv.URL, te.Data
}

func TestClient(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	c, url, work := newServer(t)
	ctx := context.Background()

	t.Run("execute keeps state", func(t *testing.T) {
		res, err := c.Execute(ctx, api.Request{SessionID: "c1", Code: "x = 41"})
		require.NoError(t, err)
		require.Equal(t, api.StatusOK, res.Status)
		res, err = c.Execute(ctx, api.Request{SessionID: "c1", Code: "x + 1"})
		require.NoError(t, err)
		assert.Equal(t, "42", res.Result)
	})

	t.Run("stream", func(t *testing.T) {
		var mu sync.Mutex
		var firstAt time.Time
		var streamed strings.Builder
		res, err := c.ExecuteStream(ctx, api.Request{SessionID: "c1",
			Code: "import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')"},
			func(ev api.Event) {
				mu.Lock()
				defer mu.Unlock()
				if ev.Type == "stream" {
					if firstAt.IsZero() && strings.Contains(ev.Text, "first") {
						firstAt = time.Now()
					}
					streamed.WriteString(ev.Text)
				}
			})
		done := time.Now()
		require.NoError(t, err)
		assert.Equal(t, api.StatusOK, res.Status)
		assert.Equal(t, "first\nsecond\n", res.Stdout)
		mu.Lock()
		defer mu.Unlock()
		require.False(t, firstAt.IsZero(), "the first print was streamed")
		assert.GreaterOrEqual(t, done.Sub(firstAt), 1500*time.Millisecond, "it arrived while the cell slept")
		assert.Equal(t, "first\nsecond\n", streamed.String())
	})

	t.Run("artifacts", func(t *testing.T) {
		_, err := c.Execute(ctx, api.Request{SessionID: "c1", Code: "open('outputs/hello.txt', 'w').write('hello')"})
		require.NoError(t, err)
		arts, err := c.Artifacts(ctx, "c1")
		require.NoError(t, err)
		require.Len(t, arts, 1)
		assert.Equal(t, "hello.txt", arts[0].Name)
		var buf bytes.Buffer
		require.NoError(t, c.DownloadArtifact(ctx, "c1", "hello.txt", &buf))
		assert.Equal(t, "hello", buf.String())
	})

	t.Run("sessions", func(t *testing.T) {
		list, err := c.Sessions(ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)
		assert.Equal(t, "c1", list[0].ID)
		require.NoError(t, c.ResetSession(ctx, "c1"))
		res, err := c.Execute(ctx, api.Request{SessionID: "c1", Code: "x"})
		require.NoError(t, err)
		assert.Equal(t, api.StatusError, res.Status, "reset dropped x")
		require.NoError(t, c.CloseSession(ctx, "c1"))
		err = c.ResetSession(ctx, "c1")
		assert.True(t, errors.Is(err, api.ErrNotFound), "got %v", err)
	})

	t.Run("denied", func(t *testing.T) {
		key := filepath.Join(work, "keys", "id_rsa")
		require.NoError(t, os.MkdirAll(filepath.Dir(key), 0o700))
		require.NoError(t, os.WriteFile(key, []byte("k"), 0o600))
		req := api.Request{SessionID: "c2", Code: "print(1)", Inputs: []string{key}}
		_, err := c.Execute(ctx, req)
		assert.True(t, errors.Is(err, api.ErrDenied), "got %v", err)
		res, err := c.ExecuteStream(ctx, req, nil)
		assert.True(t, errors.Is(err, api.ErrDenied), "got %v", err)
		require.NotNil(t, res, "a streamed denial carries the denied result")
		assert.Equal(t, api.StatusDenied, res.Status)
	})

	t.Run("wrong token", func(t *testing.T) {
		bad, err := client.New(url, &client.Options{Token: "nope"})
		require.NoError(t, err)
		_, err = bad.Sessions(ctx)
		var ae *client.APIError
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, 401, ae.StatusCode)
	})
}
