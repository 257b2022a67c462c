package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
)

func TestClientFiles(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	c, _, _ := newServer(t)
	ctx := context.Background()
	data := make([]byte, 3<<20)
	_, _ = rand.Read(data)

	n, err := c.Upload(ctx, "cf", "inputs/odd name %?.bin", bytes.NewReader(data), nil)
	require.NoError(t, err)
	assert.EqualValues(t, len(data), n)
	_, err = c.Upload(ctx, "cf", "inputs/odd name %?.bin", strings.NewReader("x"), &client.UploadOptions{NoOverwrite: true})
	require.ErrorIs(t, err, api.ErrExists)

	res, err := c.Execute(ctx, api.Request{SessionID: "cf", Code: "import os; os.path.getsize('inputs/odd name %?.bin')"})
	require.NoError(t, err)
	assert.Equal(t, "3145728", res.Result)

	var got bytes.Buffer
	n, err = c.Download(ctx, "cf", "inputs/odd name %?.bin", &got)
	require.NoError(t, err)
	assert.EqualValues(t, len(data), n)
	assert.True(t, bytes.Equal(data, got.Bytes()))

	l, err := c.List(ctx, "cf", "inputs", 0)
	require.NoError(t, err)
	require.Len(t, l.Entries, 1)
	assert.Equal(t, "odd name %?.bin", l.Entries[0].Name)

	_, err = c.Download(ctx, "cf", "../etc/passwd", &got)
	require.ErrorIs(t, err, api.ErrInvalidPath)
	_, err = c.Download(ctx, "cf", "inputs", &got)
	require.ErrorIs(t, err, api.ErrIsDirectory)
	require.ErrorIs(t, c.Remove(ctx, "cf", "inputs", false), api.ErrIsDirectory)
	require.NoError(t, c.Remove(ctx, "cf", "inputs/odd name %?.bin", false))
	_, err = c.Download(ctx, "cf", "inputs/odd name %?.bin", &got)
	require.ErrorIs(t, err, api.ErrNotFound)

	br, err := c.Batch(ctx, "cf", api.FileBatch{
		Uploads:   []api.FileUpload{{Path: "a.txt", Content: []byte("A")}, {Path: "/abs", Content: []byte("B")}},
		Downloads: []api.FileDownload{{Path: "a.txt"}, {Path: "outputs"}},
	})
	require.NoError(t, err)
	assert.Equal(t, api.FileOK, br.Uploads[0].Status)
	assert.Equal(t, api.CodeInvalidPath, br.Uploads[1].Status)
	assert.Equal(t, "A", string(br.Downloads[0].Content))
	assert.Equal(t, api.CodeIsDirectory, br.Downloads[1].Status)
}
