package jupyterapi_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyterapi"
)

// TestChannelsBadFrames: what a client cannot send. Each bad frame closes
// its own connection with a code and a reason; the kernel and its other
// clients go on.
func TestChannelsBadFrames(t *testing.T) {
	s := newGW(t, jupyterapi.Options{MaxFrameBytes: 64 << 10}, nil)
	id := s.start("default")
	for _, tc := range []struct {
		name   string
		typ    int
		frame  string
		code   int
		reason string
	}{
		{"malformed JSON", websocket.TextMessage, `{"channel":"shell",`, websocket.CloseInvalidFramePayloadData, "malformed"},
		{"not an object", websocket.TextMessage, `[1,2]`, websocket.CloseInvalidFramePayloadData, "malformed"},
		{"no header", websocket.TextMessage, `{"channel":"shell","content":{}}`, websocket.CloseInvalidFramePayloadData, "no header"},
		{"no msg_id", websocket.TextMessage, `{"channel":"shell","header":{"msg_type":"kernel_info_request"},"content":{}}`, websocket.CloseInvalidFramePayloadData, "msg_id"},
		{"iopub from a client", websocket.TextMessage, `{"channel":"iopub","header":{"msg_id":"1","msg_type":"stream"},"content":{}}`, websocket.CloseInvalidFramePayloadData, "channel"},
		{"content not an object", websocket.TextMessage, `{"channel":"shell","header":{"msg_id":"1","msg_type":"execute_request"},"content":"print(1)"}`, websocket.CloseInvalidFramePayloadData, "content"},
		{"huge header", websocket.TextMessage, `{"channel":"shell","header":{"msg_id":"1","msg_type":"x","pad":"` + strings.Repeat("a", 8<<10) + `"},"content":{}}`, websocket.CloseInvalidFramePayloadData, "header"},
		{"huge frame", websocket.TextMessage, `{"channel":"shell","header":{"msg_id":"1","msg_type":"execute_request"},"content":{"code":"` + strings.Repeat("#", 100<<10) + `"}}`, websocket.CloseMessageTooBig, ""},
		{"binary frame", websocket.BinaryMessage, "\x00\x01", websocket.CloseUnsupportedData, "binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := s.mustDial(id)
			if err := c.c.WriteMessage(tc.typ, []byte(tc.frame)); err != nil {
				// The server closed the connection at the limit, before the
				// rest of a huge frame was written: the peer resets it.
				require.Equal(t, websocket.CloseMessageTooBig, tc.code, "write: %v", err)
				require.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE), "write: %v", err)
				return
			}
			code, reason := c.closeCode(30 * time.Second)
			if code == -1 && tc.code == websocket.CloseMessageTooBig {
				assert.Contains(t, reason, "reset", "the server closed at the limit with the frame's rest unread")
				return
			}
			assert.Equal(t, tc.code, code)
			assert.Contains(t, reason, tc.reason)
		})
	}
	c := s.mustDial(id)
	x := c.execute("print('alive')")
	rep, io := c.until(x, "execute_reply")
	assert.Equal(t, "ok", rep.text("status"))
	assert.Equal(t, "alive\n", stdout(io))
}

// TestSlowClient: a client that never reads is dropped with a reason once its
// queue is full; the kernel's other client and an agent's /v1 calls on the
// same session are not held up.
func TestSlowClient(t *testing.T) {
	s := newGW(t, jupyterapi.Options{ClientQueue: 64, ClientQueueBytes: 1 << 20, WriteTimeout: 2 * time.Second}, func(o *executor.Options) {
		o.MaxStreamBytes = 64 << 20
	})
	id := s.start("default")
	slow, fast := s.mustDial(id), s.mustDial(id)
	_ = slow // never reads
	// The fast client reads everything, in the background, cheaply (the
	// race detector makes decoding JSON slower than the kernel writes).
	var got atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_ = fast.c.SetReadDeadline(time.Now().Add(2 * time.Minute))
			_, b, err := fast.c.ReadMessage()
			if err != nil {
				t.Errorf("the fast client: %v", err)
				return
			}
			got.Add(int64(len(b)))
			if bytes.Contains(b, []byte(`"msg_type":"execute_reply"`)) {
				return
			}
		}
	}()
	// 32 MB of output in 64 KB flushed chunks, paced (about 6 MB/s) so that a
	// client that reads keeps up: far more than the slow client's socket
	// buffers (a few MB on loopback) and queue hold.
	began := time.Now()
	fast.execute("import sys, time\nchunk = 'y' * 65535 + '\\n'\nfor i in range(512):\n    sys.stdout.write(chunk); sys.stdout.flush(); time.sleep(0.01)")
	<-done
	// Paced at 5 s; a kernel held up by the slow client would take far longer.
	assert.Less(t, time.Since(began), 30*time.Second, "the cell was not held up")
	assert.Greater(t, got.Load(), int64(512<<16), "the fast client got all the output")
	// The server dropped the slow client: its close frame sits behind the
	// data the client never read, so the test sees the count, not the frame.
	assert.Equal(t, 1, connections(t, s, id))
	// Whichever came first: its queue full, or a write stalled past WriteTimeout.
	dropped := s.g.Stats().Dropped
	assert.Equal(t, int64(1), dropped[jupyterapi.DropTooSlow]+dropped[jupyterapi.DropWriteTimeout], "counted as a drop: %v", dropped)

	// An agent's call on the session runs, and promptly.
	start := time.Now()
	res, err := s.e.Execute(context.Background(), api.Request{SessionID: id, Code: "print('agent')"})
	require.NoError(t, err)
	assert.Equal(t, "agent\n", res.Stdout)
	assert.Less(t, time.Since(start), 10*time.Second)
}
