package main

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/workspace"
)

func TestDiskFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		want    workspace.Options
		wantErr string
	}{
		{nil, workspace.Options{DiskQuota: 4 << 30, MaxArtifactsTotalBytes: 8 << 30}, ""},
		{[]string{"--disk-quota=64MiB", "--max-artifacts-bytes=1.5GB", "--artifacts-on-close=delete"},
			workspace.Options{DiskQuota: 64 << 20, MaxArtifactsTotalBytes: 1.5e9, RemoveArtifacts: true}, ""},
		{[]string{"--disk-quota=0", "--max-artifacts-bytes=12345"}, workspace.Options{MaxArtifactsTotalBytes: 12345}, ""},
		{[]string{"--disk-quota=2G"}, workspace.Options{DiskQuota: 2 << 30, MaxArtifactsTotalBytes: 8 << 30}, ""},
		{[]string{"--disk-quota=lots"}, workspace.Options{}, "not a size"},
		{[]string{"--disk-quota=-1GiB"}, workspace.Options{}, "not a size"},
		{[]string{"--artifacts-on-close=archive"}, workspace.Options{}, "neither keep nor delete"},
	}
	for _, tt := range tests {
		var f diskFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.register(fs)
		err := fs.Parse(tt.args)
		var got workspace.Options
		if err == nil {
			err = f.apply(&got)
		}
		if tt.wantErr != "" {
			require.Error(t, err, tt.args)
			assert.Contains(t, err.Error(), tt.wantErr)
			continue
		}
		require.NoError(t, err, tt.args)
		assert.Equal(t, tt.want, got, tt.args)
	}
	q := byteSize(4 << 30)
	assert.Equal(t, "4GiB", q.String())
}
