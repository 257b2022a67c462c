package sandbox_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/stretchr/testify/assert"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
)

func TestStartErrorMessage(t *testing.T) {
	t.Parallel()
	cause := errors.New("boom")
	for _, tc := range []struct {
		name string
		e    sandbox.StartError
		want string
	}{
		{"container exited", sandbox.StartError{Kind: sandbox.KindContainer, Name: "kernelbox-1", Err: cause, ExitCode: 137, OOMKilled: true, Logs: []string{"a", "b"}},
			"start container kernelbox-1: boom (container exited with code 137, OOM-killed); last container log lines:\n    a\n    b"},
		{"container running", sandbox.StartError{Kind: sandbox.KindContainer, Name: "kernelbox-2", Err: cause, Running: true},
			"start container kernelbox-2: boom (container still running); no container logs"},
		{"task failed", sandbox.StartError{Kind: sandbox.KindService, Name: "kernelbox-ab", Node: "vm1", State: "failed", Err: cause, Logs: []string{"x"}},
			"start service kernelbox-ab on vm1: boom (task failed); last service log lines:\n    x"},
		{"task not placed", sandbox.StartError{Kind: sandbox.KindService, Name: "kernelbox-cd", Err: cause},
			"start service kernelbox-cd: boom; no service logs"},
	} {
		assert.Equal(t, tc.want, tc.e.Error(), tc.name)
		assert.ErrorIs(t, &tc.e, cause, tc.name)
	}
}

// LogLines keeps the streams' order and the last n non-blank lines, and says why
// when there is nothing to read.
func TestLogLines(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	frame(&buf, stdcopy.Stdout, "one\n\n")
	frame(&buf, stdcopy.Stderr, "  Traceback line\r\n")
	frame(&buf, stdcopy.Stdout, "three  \nfour\n")
	assert.Equal(t, []string{"  Traceback line", "three", "four"}, sandbox.LogLines(io.NopCloser(bytes.NewReader(buf.Bytes())), nil, 3))
	assert.Equal(t, []string{"one", "  Traceback line", "three", "four"}, sandbox.LogLines(io.NopCloser(&buf), nil, 10))

	assert.Equal(t, []string{"(logs unavailable: gone)"}, sandbox.LogLines(nil, errors.New("gone"), 3))
	got := sandbox.LogLines(io.NopCloser(strings.NewReader("not multiplexed")), nil, 3)
	assert.Len(t, got, 1)
	assert.Contains(t, got[0], "(logs unreadable: ")
}

// frame writes s to w as one frame of the engine's multiplexed log stream.
func frame(w *bytes.Buffer, stream stdcopy.StdType, s string) {
	hdr := make([]byte, 8)
	hdr[0] = byte(stream)
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(s)))
	w.Write(hdr)
	w.WriteString(s)
}
