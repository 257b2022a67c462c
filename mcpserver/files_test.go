package mcpserver_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/mcpserver"
	"github.com/kernelbox/kernelbox/permissions"
)

// linkOf returns the resource links of a tool result.
func linkOf(res *mcp.CallToolResult) []*mcp.ResourceLink {
	var links []*mcp.ResourceLink
	for _, c := range res.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			links = append(links, l)
		}
	}
	return links
}

// TestFilesTools: write_file hands the kernel a file, list_files and read_file
// show what the kernel wrote; long text is paged within the budget with a link
// to the whole file, binary comes as a resource link; bad paths (.., absolute,
// NUL, a symbolic link the kernel planted, a FIFO, a directory) are refused
// with the HTTP API's codes and nothing outside the session is read or written.
func TestFilesTools(t *testing.T) { filesTools(t, newEnv(t)) }

// TestRemoteFilesTools: the files tools on the remote backend, whose files are
// the kernel's on a real Jupyter Server: read_file reads a stream through the
// kernel (pages, offsets, images, resources) and every answer, error code and
// refusal is local's.
func TestRemoteFilesTools(t *testing.T) {
	te := testexec.Remote(t, nil)
	filesTools(t, &env{E: te.Exec, WS: te.WS, Data: te.Data})
}

func filesTools(t *testing.T, e *env) {
	cs := e.client(t, mcpserver.Options{MaxTextBytes: 1000, MaxWriteBytes: 4096, MaxResourceBytes: 64 << 10})
	ctx := context.Background()
	host := t.TempDir()
	secret := filepath.Join(host, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("host secret"), 0o644))

	res := call(t, cs, "write_file", map[string]any{"session_id": "mf", "path": "inputs/data.csv", "content": "a,b\n1,2\n3,4\n"})
	require.False(t, res.IsError, textOf(res))
	assert.Contains(t, textOf(res), `"inputs/data.csv"`)
	res = call(t, cs, "execute_code", map[string]any{"session_id": "mf", "code": `import os
print(open("inputs/data.csv").read().count("\n"))
os.symlink(` + pyQuote(secret) + `, "link")
os.symlink(` + pyQuote(host) + `, "linkdir")
os.mkfifo("fifo")
os.makedirs("outputs", exist_ok=True)
open("outputs/long.txt", "w").write("".join(f"line {i}\n" for i in range(1000)))
open("outputs/blob.bin", "wb").write(bytes(range(256)) * 4)`})
	require.False(t, res.IsError, textOf(res))
	assert.Equal(t, "3", strings.TrimSpace(structured(t, res)["stdout"].(string)))

	t.Run("list", func(t *testing.T) {
		res := call(t, cs, "list_files", map[string]any{"session_id": "mf"})
		require.False(t, res.IsError, textOf(res))
		txt := textOf(res)
		for _, want := range []string{"- inputs/", "- outputs/", "- link (symlink", "- fifo (other"} {
			assert.Contains(t, txt, want)
		}
		res = call(t, cs, "list_files", map[string]any{"session_id": "mf", "dir": "inputs"})
		require.False(t, res.IsError, textOf(res))
		entries := structured(t, res)["entries"].([]any)
		require.Len(t, entries, 1)
		assert.Equal(t, "data.csv", entries[0].(map[string]any)["name"])
		assert.EqualValues(t, 12, entries[0].(map[string]any)["size"])
	})

	t.Run("read", func(t *testing.T) {
		res := call(t, cs, "read_file", map[string]any{"session_id": "mf", "path": "inputs/data.csv"})
		require.False(t, res.IsError, textOf(res))
		assert.Contains(t, textOf(res), "a,b\n1,2\n3,4\n")
		assert.Empty(t, linkOf(res), "a file shown whole needs no link")

		// Long text: one page within the budget, the offset to go on, a link.
		res = call(t, cs, "read_file", map[string]any{"session_id": "mf", "path": "outputs/long.txt"})
		require.False(t, res.IsError, textOf(res))
		txt := textOf(res)
		assert.LessOrEqual(t, len(txt), 1000+200, "the page stays within the text budget")
		assert.Contains(t, txt, "line 0\n")
		assert.NotContains(t, txt, "line 999")
		assert.Contains(t, txt, "call read_file again with offset=1000")
		links := linkOf(res)
		require.Len(t, links, 1)
		assert.Equal(t, mcpserver.FileURI("mf", "outputs/long.txt"), links[0].URI)
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: links[0].URI})
		require.NoError(t, err)
		assert.True(t, strings.HasSuffix(rr.Contents[0].Text, "line 999\n"))

		// Binary: a link, and the resource gives the bytes.
		res = call(t, cs, "read_file", map[string]any{"session_id": "mf", "path": "outputs/blob.bin"})
		require.False(t, res.IsError, textOf(res))
		assert.Contains(t, textOf(res), "is not shown")
		links = linkOf(res)
		require.Len(t, links, 1)
		rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: links[0].URI})
		require.NoError(t, err)
		assert.Equal(t, []byte(strings.Repeat(string(bytesRange()), 4)), rr.Contents[0].Blob)
	})

	t.Run("bad paths", func(t *testing.T) {
		for _, tc := range []struct{ path, code string }{
			{"../x", "invalid_path"},
			{"outputs/../../x", "invalid_path"},
			{"/etc/passwd", "invalid_path"},
			{secret, "invalid_path"},
			{"a\x00b", "invalid_path"},
			{"link", "invalid_path"},
			{"linkdir/secret.txt", "invalid_path"},
			{"fifo", "invalid_path"},
			{"inputs", "is_directory"},
			{"inputs/data.csv/x", "not_directory"},
			{"missing.txt", "not_found"},
		} {
			res := call(t, cs, "read_file", map[string]any{"session_id": "mf", "path": tc.path})
			require.True(t, res.IsError, "read %q: %s", tc.path, textOf(res))
			assert.True(t, strings.HasPrefix(textOf(res), tc.code+":"), "read %q: %s", tc.path, textOf(res))
			assert.NotContains(t, textOf(res), "host secret")
		}
		res := call(t, cs, "read_file", map[string]any{"session_id": "mf", "path": "../x"})
		assert.Contains(t, textOf(res), "relative to the session's working directory", "the path rules are explained")
		res = call(t, cs, "list_files", map[string]any{"session_id": "mf", "dir": "linkdir"})
		require.True(t, res.IsError, textOf(res))
		assert.NotContains(t, textOf(res), "secret.txt")

		for _, p := range []string{"../escape.txt", "/tmp/escape.txt", "linkdir/escape.txt", "inputs", "fifo/x"} {
			res := call(t, cs, "write_file", map[string]any{"session_id": "mf", "path": p, "content": "escaped"})
			require.True(t, res.IsError, "write %q: %s", p, textOf(res))
		}
		_, err := os.Lstat(filepath.Join(host, "escape.txt"))
		require.ErrorIs(t, err, os.ErrNotExist, "nothing was written through the planted link")
		// A write to the link's own name replaces the link; its target is untouched.
		res = call(t, cs, "write_file", map[string]any{"session_id": "mf", "path": "link", "content": "replaced"})
		require.False(t, res.IsError, textOf(res))
		b, err := os.ReadFile(secret)
		require.NoError(t, err)
		assert.Equal(t, "host secret", string(b), "the link's target is untouched")
		res = call(t, cs, "read_file", map[string]any{"session_id": "mf", "path": "link"})
		assert.Contains(t, textOf(res), "replaced")

		res = call(t, cs, "write_file", map[string]any{"session_id": "mf", "path": "inputs/data.csv", "content": "x", "no_overwrite": true})
		require.True(t, res.IsError)
		assert.True(t, strings.HasPrefix(textOf(res), "exists:"), textOf(res))
	})

	t.Run("too large", func(t *testing.T) {
		res := call(t, cs, "write_file", map[string]any{"session_id": "mf", "path": "inputs/big.txt", "content": strings.Repeat("x", 5000)})
		require.True(t, res.IsError)
		assert.True(t, strings.HasPrefix(textOf(res), "too_large:"), textOf(res))
		res = call(t, cs, "list_files", map[string]any{"session_id": "mf", "dir": "inputs"})
		assert.NotContains(t, textOf(res), "big.txt", "a refused write leaves no file")

		res = call(t, cs, "execute_code", map[string]any{"session_id": "mf", "code": `open("outputs/huge.txt", "w").write("y" * 100000)`})
		require.False(t, res.IsError, textOf(res))
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.FileURI("mf", "outputs/huge.txt")})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "read_file")
		res = call(t, cs, "read_file", map[string]any{"session_id": "mf", "path": "outputs/huge.txt", "offset": 99990})
		require.False(t, res.IsError, textOf(res))
		assert.Contains(t, textOf(res), "bytes 99990-100000")
	})

	t.Run("image", func(t *testing.T) {
		res := call(t, cs, "execute_code", map[string]any{"session_id": "mf", "code": `import hashlib, struct, zlib
def chunk(k, d): return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d) & 0xffffffff)
raw = b"".join(b"\x00" + bytes((x ^ y) % 256 for x in range(32) for _ in range(3)) for y in range(32))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 32, 32, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open("outputs/tile.png", "wb").write(png)
print(hashlib.sha256(png).hexdigest())`})
		require.False(t, res.IsError, textOf(res))
		want := strings.TrimSpace(structured(t, res)["stdout"].(string))
		res = call(t, cs, "read_file", map[string]any{"session_id": "mf", "path": "outputs/tile.png"})
		require.False(t, res.IsError, textOf(res))
		var img *mcp.ImageContent
		for _, c := range res.Content {
			if i, ok := c.(*mcp.ImageContent); ok {
				img = i
			}
		}
		require.NotNil(t, img, "a small image is returned inline: %s", textOf(res))
		assert.Equal(t, "image/png", img.MIMEType)
		sum := sha256.Sum256(img.Data)
		assert.Equal(t, want, hex.EncodeToString(sum[:]), "the image is the file the kernel wrote")
	})

	t.Run("no session", func(t *testing.T) {
		res := call(t, cs, "read_file", map[string]any{"session_id": "nobody", "path": "x"})
		require.True(t, res.IsError)
		assert.Contains(t, textOf(res), "the session does not exist")
	})
}

// TestFilesToolsDenied: with a policy that denies files.*, every files tool
// fails saying so, and write_file writes nothing (the session is not created).
func TestFilesToolsDenied(t *testing.T) {
	te := testexec.Local(t, func(o *executor.Options) {
		p := *o.Permissions
		p.Policy = permissions.NewPolicy(append(permissions.DefaultRules(),
			permissions.Rule{Effect: permissions.Deny, Capability: "files.*", Reason: "no files API here", Source: "test"})...)
		o.Permissions = &p
	})
	cs := connect(t, mcpserver.New(te.Exec, te.WS, mcpserver.Options{}), nil)
	res := call(t, cs, "write_file", map[string]any{"session_id": "d", "path": "inputs/x.txt", "content": "x"})
	require.True(t, res.IsError, textOf(res))
	assert.True(t, strings.HasPrefix(textOf(res), "permission_denied:"), textOf(res))
	assert.Contains(t, textOf(res), "no files API here")
	assert.Contains(t, textOf(res), "retrying will not help")
	_, err := te.Exec.Session("d")
	require.ErrorIs(t, err, api.ErrNotFound, "a denied write creates no session")
	_, err = os.Lstat(filepath.Join(te.WS.Root(), "sessions", "d"))
	require.ErrorIs(t, err, os.ErrNotExist, "a denied write writes nothing")

	res = call(t, cs, "execute_code", map[string]any{"session_id": "d", "code": `open("x.txt", "w").write("x")`})
	require.False(t, res.IsError, textOf(res))
	for tool, args := range map[string]map[string]any{
		"list_files": {"session_id": "d"},
		"read_file":  {"session_id": "d", "path": "x.txt"},
	} {
		res := call(t, cs, tool, args)
		require.True(t, res.IsError, "%s: %s", tool, textOf(res))
		assert.True(t, strings.HasPrefix(textOf(res), "permission_denied:"), textOf(res))
	}
	_, err = cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: mcpserver.FileURI("d", "x.txt")})
	require.Error(t, err)
}

func bytesRange() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// pyQuote quotes s as a Python string literal.
func pyQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
