package mcpserver_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/mcpserver"
)

// TestKernelbox runs the tools against one real local kernel server; the subtests
// share it (and its sessions) and run in order.
func TestKernelbox(t *testing.T) {
	e := newEnv(t)
	cs := e.client(t, mcpserver.Options{})

	t.Run("tools", func(t *testing.T) {
		res, err := cs.ListTools(context.Background(), nil)
		require.NoError(t, err)
		byName := map[string]*mcp.Tool{}
		for _, tool := range res.Tools {
			byName[tool.Name] = tool
		}
		for _, name := range []string{"execute_code", "list_sessions", "reset_session", "list_artifacts", "read_artifact", "list_files", "read_file", "write_file"} {
			require.Contains(t, byName, name)
		}
		d := byName["execute_code"].Description
		for _, want := range []string{"persist", "inputs/<basename>", "outputs/", "timeout", "truncated: true"} {
			assert.Contains(t, d, want)
		}
		assert.NotNil(t, byName["execute_code"].OutputSchema)
		tmpls, err := cs.ListResourceTemplates(context.Background(), nil)
		require.NoError(t, err)
		var uris []string
		for _, rt := range tmpls.ResourceTemplates {
			uris = append(uris, rt.URITemplate)
		}
		assert.ElementsMatch(t, []string{mcpserver.ArtifactURITemplate, mcpserver.FileURITemplate}, uris)
	})

	t.Run("state persists", func(t *testing.T) {
		res := call(t, cs, "execute_code", map[string]any{"code": "x = 41"})
		require.False(t, res.IsError, textOf(res))
		res = call(t, cs, "execute_code", map[string]any{"code": "x + 1"})
		require.False(t, res.IsError, textOf(res))
		assert.Contains(t, textOf(res), "result:\n42")
		st := structured(t, res)
		assert.Equal(t, "42", st["result"])
		assert.Equal(t, "ok", st["status"])
		assert.Equal(t, "default", st["session_id"])
	})

	t.Run("sessions are separate", func(t *testing.T) {
		res := call(t, cs, "execute_code", map[string]any{"code": "x", "session_id": "other"})
		assert.True(t, res.IsError, "a cell error is reported as a failed call")
		assert.Contains(t, textOf(res), "NameError")
		assert.Equal(t, "error", structured(t, res)["status"])
	})

	t.Run("inputs", func(t *testing.T) {
		require.NoError(t, os.WriteFile(filepath.Join(e.Data, "numbers.csv"), []byte("n\n1\n2\n3\n"), 0o644))
		res := call(t, cs, "execute_code", map[string]any{
			"code":   "sum(int(l) for l in open('inputs/numbers.csv').read().split()[1:])",
			"inputs": []string{filepath.Join(e.Data, "numbers.csv")},
		})
		require.False(t, res.IsError, textOf(res))
		assert.Equal(t, "6", structured(t, res)["result"])
	})

	t.Run("denied input", func(t *testing.T) {
		key := filepath.Join(e.Data, ".ssh", "id_rsa")
		require.NoError(t, os.MkdirAll(filepath.Dir(key), 0o700))
		require.NoError(t, os.WriteFile(key, []byte("secret"), 0o600))
		res := call(t, cs, "execute_code", map[string]any{"code": "print('ran')", "inputs": []string{key}})
		require.True(t, res.IsError)
		txt := textOf(res)
		assert.Contains(t, txt, "nothing was run")
		assert.Contains(t, txt, `"SSH keys"`)
		assert.Contains(t, txt, key)
		assert.NotContains(t, txt, "ran\n")
	})

	t.Run("invalid session id", func(t *testing.T) {
		res := call(t, cs, "execute_code", map[string]any{"code": "1", "session_id": "../etc"})
		require.True(t, res.IsError)
		assert.Contains(t, textOf(res), "session_id")
	})

	t.Run("plot", func(t *testing.T) {
		res := call(t, cs, "execute_code", map[string]any{
			"code": "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()",
		})
		require.False(t, res.IsError, textOf(res))
		var img *mcp.ImageContent
		for _, c := range res.Content {
			if ic, ok := c.(*mcp.ImageContent); ok {
				img = ic
			}
		}
		require.NotNil(t, img, "the figure comes back inline: %s", textOf(res))
		assert.Equal(t, "image/png", img.MIMEType)
		assert.True(t, strings.HasPrefix(string(img.Data), "\x89PNG"))
		assert.Contains(t, textOf(res), "[shown below]")
	})

	t.Run("plot over the image budget", func(t *testing.T) {
		small := e.client(t, mcpserver.Options{MaxImageBytes: 100})
		res := call(t, small, "execute_code", map[string]any{
			"code": "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()",
		})
		require.False(t, res.IsError, textOf(res))
		var link *mcp.ResourceLink
		for _, c := range res.Content {
			switch c := c.(type) {
			case *mcp.ImageContent:
				t.Fatal("an image over the budget is not inlined")
			case *mcp.ResourceLink:
				link = c
			}
		}
		require.NotNil(t, link)
		assert.Contains(t, textOf(res), "was not shown inline")
		rr, err := small.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: link.URI})
		require.NoError(t, err)
		require.Len(t, rr.Contents, 1)
		assert.True(t, strings.HasPrefix(string(rr.Contents[0].Blob), "\x89PNG"))
		// The structured copy leaves the image data out and says so.
		notes := fmtNotes(structured(t, res))
		assert.Contains(t, notes, "outputs[0]: its image/png data")
		assert.Contains(t, notes, "is left out of this structured result, over the 100 bytes budget for rich data; it is the artifact "+link.Name)
	})

	t.Run("truncation", func(t *testing.T) {
		small := e.client(t, mcpserver.Options{MaxTextBytes: 2000})
		res := call(t, small, "execute_code", map[string]any{
			"code": "for i in range(20000): print(f'line {i}')",
		})
		require.False(t, res.IsError, textOf(res))
		txt := textOf(res)
		assert.Less(t, len(txt), 3000)
		assert.Contains(t, txt, "line 0\n")
		assert.Contains(t, txt, "line 19999\n")
		assert.Contains(t, txt, "bytes dropped here")
		assert.Contains(t, txt, "truncated: this answer is capped at 2,000 bytes")
		st := structured(t, res)
		assert.Equal(t, true, st["truncated"])
		assert.Contains(t, st["truncation_note"], "of stdout")
	})

	t.Run("artifacts", func(t *testing.T) {
		res := call(t, cs, "execute_code", map[string]any{
			"code": "import os\nos.makedirs('outputs', exist_ok=True)\nopen('outputs/report.txt', 'w').write(''.join(f'row {i}\\n' for i in range(5000)))",
		})
		require.False(t, res.IsError, textOf(res))
		assert.Contains(t, textOf(res), "report.txt (text/plain")

		res = call(t, cs, "list_artifacts", map[string]any{})
		require.False(t, res.IsError, textOf(res))
		assert.Contains(t, textOf(res), "kernelbox://artifacts/default/report.txt")

		small := e.client(t, mcpserver.Options{MaxTextBytes: 1000})
		res = call(t, small, "read_artifact", map[string]any{"name": "report.txt"})
		require.False(t, res.IsError, textOf(res))
		txt := textOf(res)
		assert.Contains(t, txt, "row 0\n")
		assert.Contains(t, txt, "call read_artifact again with offset=1000")
		res = call(t, small, "read_artifact", map[string]any{"name": "report.txt", "offset": 1000, "max_bytes": 50})
		assert.Contains(t, textOf(res), "bytes 1000-1050")

		rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: mcpserver.ArtifactURI("default", "report.txt")})
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(rr.Contents[0].Text, "row 0\nrow 1\n"))

		res = call(t, cs, "read_artifact", map[string]any{"name": "missing.txt"})
		assert.True(t, res.IsError)
		assert.Contains(t, textOf(res), "list_artifacts")
		_, err = cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: mcpserver.ArtifactURI("default", "../x")})
		assert.Error(t, err)
	})

	t.Run("sessions and reset", func(t *testing.T) {
		res := call(t, cs, "list_sessions", nil)
		require.False(t, res.IsError, textOf(res))
		assert.Contains(t, textOf(res), "- default: idle")
		res = call(t, cs, "reset_session", map[string]any{"session_id": "default"})
		require.False(t, res.IsError, textOf(res))
		res = call(t, cs, "execute_code", map[string]any{"code": "x"})
		assert.True(t, res.IsError)
		assert.Contains(t, textOf(res), "NameError")
		res = call(t, cs, "reset_session", map[string]any{"session_id": "nope"})
		assert.True(t, res.IsError)
		assert.Contains(t, textOf(res), "no live session")
	})

	t.Run("timeout", func(t *testing.T) {
		res := call(t, cs, "execute_code", map[string]any{"code": "y = 1\nimport time\ntime.sleep(30)", "timeout_seconds": 1})
		require.True(t, res.IsError)
		st := structured(t, res)
		assert.Equal(t, "timeout", st["status"])
		assert.Contains(t, textOf(res), "status: timeout")
		res = call(t, cs, "execute_code", map[string]any{"code": "y"})
		assert.Equal(t, "1", structured(t, res)["result"], "variables survive an interrupted call")
	})
}

// TestProgress streams a cell's output as progress notifications before the result.
func TestProgress(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	type note struct {
		at  time.Time
		msg string
	}
	var notes []note
	cs := connect(t, mcpserver.New(e.E, e.WS, mcpserver.Options{}), &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			notes = append(notes, note{time.Now(), req.Params.Message})
			mu.Unlock()
		},
	})
	params := &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{
		"code": "import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')",
	}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(context.Background(), params)
	require.NoError(t, err)
	done := time.Now()
	require.False(t, res.IsError, textOf(res))

	mu.Lock()
	defer mu.Unlock()
	var first time.Time
	for _, n := range notes {
		if strings.Contains(n.msg, "first\n") {
			first = n.at
			break
		}
	}
	require.False(t, first.IsZero(), "a progress notification carried the first print: %v", notes)
	assert.Greater(t, done.Sub(first), time.Second, "it arrived well before the result")
}

// fmtNotes joins a structured result's notes.
func fmtNotes(st map[string]any) string {
	notes, _ := st["notes"].([]any)
	var out []string
	for _, n := range notes {
		s, _ := n.(string)
		out = append(out, s)
	}
	return strings.Join(out, "\n")
}
