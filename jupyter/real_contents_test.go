package jupyter_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/stretchr/testify/require"
)

// SaveFile writes through a real server's Contents API, whole and in pieces, over its
// unix socket; a wrong token is a typed 403.
func TestRealSaveFile(t *testing.T) {
	root := t.TempDir()
	s := startServerAt(t, root, false)
	c := newClient(t, s.Endpoint())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, os.Mkdir(filepath.Join(root, "in dir"), 0o755))

	require.NoError(t, c.SaveFile(ctx, "in dir/whole #1.bin", []byte("hello\x00world"), 0))
	got, err := os.ReadFile(filepath.Join(root, "in dir", "whole #1.bin"))
	require.NoError(t, err)
	require.Equal(t, []byte("hello\x00world"), got)

	pieces := make([][]byte, 3)
	for i := range pieces {
		pieces[i] = make([]byte, 300<<10)
		_, _ = rand.Read(pieces[i])
	}
	for i, p := range pieces {
		chunk := i + 1
		if i == len(pieces)-1 {
			chunk = -1
		}
		require.NoError(t, c.SaveFile(ctx, "in dir/chunked.bin", p, chunk))
	}
	got, err = os.ReadFile(filepath.Join(root, "in dir", "chunked.bin"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(bytes.Join(pieces, nil), got), "chunked upload differs (%d bytes)", len(got))

	// Saving over an existing file answers 200, which is success too.
	require.NoError(t, c.SaveFile(ctx, "in dir/whole #1.bin", []byte("again"), 0))

	ep := s.Endpoint()
	ep.Token = "wrong"
	bad := newClient(t, ep)
	err = bad.SaveFile(ctx, "in dir/x.bin", []byte("x"), 0)
	var he *jupyter.HTTPError
	require.ErrorAs(t, err, &he)
	require.Equal(t, 403, he.StatusCode)
	require.NoFileExists(t, filepath.Join(root, "in dir", "x.bin"))
}
