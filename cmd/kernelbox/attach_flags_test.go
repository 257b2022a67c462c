package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/calls"
)

// TestCallFlags: every bound of the registry of calls has a flag on serve and
// mcp, and the flags' defaults are the registry's (issue 21 item 2).
func TestCallFlags(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) calls.Options {
		t.Helper()
		fs, o := serveFlagSet(io.Discard)
		require.NoError(t, fs.Parse(args))
		return o.server.calls.options(nil)
	}
	o := parse()
	assert.Equal(t, int64(16<<20), o.MaxLogBytes)
	assert.Equal(t, int64(256<<20), o.MaxTotalLogBytes)
	assert.Equal(t, int64(64<<20), o.MaxResultBytes)
	assert.Equal(t, int64(128<<20), o.MaxTotalResultBytes)
	o = parse("--total-call-log-bytes=1000", "--call-result-bytes=2000", "--total-call-result-bytes=3000")
	assert.Equal(t, int64(1000), o.MaxTotalLogBytes)
	assert.Equal(t, int64(2000), o.MaxResultBytes)
	assert.Equal(t, int64(3000), o.MaxTotalResultBytes)
}
