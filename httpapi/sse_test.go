package httpapi_test

import (
	"github.com/kernelbox/kernelbox/api"

	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// sseServer serves a local-backend executor over httptest; its policy's workdir is
// the returned directory.
func sseServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	te := testexec.Local(t, nil)
	srv := httptest.NewServer(httpapi.New(te.Exec, httpapi.Options{Token: "tok", Workspace: te.WS}))
	t.Cleanup(srv.Close)
	return srv, te.Data
}

// sseEvent is one received Server-Sent Event and when it arrived.
type sseEvent struct {
	name string
	data string
	at   time.Time
}

// postSSE posts an execute body asking for an event stream and reads every event
// as it arrives.
func postSSE(t *testing.T, srv *httptest.Server, session, body string) []sseEvent {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/sessions/"+session+"/execute", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var events []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" {
				cur.at = time.Now()
				events = append(events, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		}
	}
	require.NoError(t, sc.Err())
	return events
}

// TestExecuteSSE checks that output is streamed while the cell runs: the first
// print arrives as a stream event well before the final done event.
func TestExecuteSSE(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	srv, work := sseServer(t)

	t.Run("stream before done", func(t *testing.T) {
		events := postSSE(t, srv, "sse", `{"code": "import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')"}`)
		require.NotEmpty(t, events)
		last := events[len(events)-1]
		require.Equal(t, "done", last.name, "the stream ends with done")
		var firstStream *sseEvent
		for i, ev := range events {
			if ev.name == "stream" && strings.Contains(ev.data, "first") {
				firstStream = &events[i]
				break
			}
		}
		require.NotNil(t, firstStream, "a stream event carried the first print: %v", events)
		var ev api.Event
		require.NoError(t, json.Unmarshal([]byte(firstStream.data), &ev))
		assert.Equal(t, "stdout", ev.Name)
		assert.GreaterOrEqual(t, last.at.Sub(firstStream.at), 1500*time.Millisecond,
			"the first print arrived while the cell was still sleeping")

		var res api.Result
		require.NoError(t, json.Unmarshal([]byte(last.data), &res))
		assert.Equal(t, api.StatusOK, res.Status)
		assert.Equal(t, "first\nsecond\n", res.Stdout)
	})

	t.Run("denied is a failed event", func(t *testing.T) {
		key := filepath.Join(work, ".ssh", "id_ed25519")
		require.NoError(t, os.MkdirAll(filepath.Dir(key), 0o700))
		require.NoError(t, os.WriteFile(key, []byte("k"), 0o600))
		body, _ := json.Marshal(httpapi.ExecuteBody{Code: "print(1)", Inputs: []string{key}})
		events := postSSE(t, srv, "sse", string(body))
		// Every streamed call first says its id (event "call"), then the failure.
		require.Len(t, events, 2)
		assert.Equal(t, "call", events[0].name)
		events = events[1:]
		assert.Equal(t, "failed", events[0].name)
		var f struct {
			Error      httpapi.ErrorDetail `json:"error"`
			HTTPStatus int                 `json:"http_status"`
			Result     *api.Result         `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(events[0].data), &f))
		assert.Equal(t, api.CodeDenied, f.Error.Code)
		assert.Equal(t, http.StatusForbidden, f.HTTPStatus)
		assert.Contains(t, f.Error.Message, "SSH keys")
		require.NotNil(t, f.Result)
		assert.Equal(t, api.StatusDenied, f.Result.Status)
	})
}
