package audit_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/audit"
)

// TestRotation: the log rotates at its size bound and keeps Keep old files,
// so its disk use is bounded; every line is a whole JSON record.
func TestRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "audit.log")
	l, err := audit.Open(path, audit.Options{MaxBytes: 4096, Keep: 2})
	require.NoError(t, err)
	for i := range 500 {
		l.Write(audit.Record{Interface: "http", TokenID: "t1", Route: "POST /v1/sessions/{id}/execute", Session: "s", Outcome: "ok", Status: 200 + i%2,
			Reason: strings.Repeat("r", 1000)})
	}
	require.NoError(t, l.Close())
	var total int64
	for _, name := range []string{"audit.log", "audit.log.1", "audit.log.2"} {
		p := filepath.Join(dir, "sub", name)
		fi, err := os.Stat(p)
		require.NoError(t, err, name)
		assert.LessOrEqual(t, fi.Size(), int64(4096), name)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), name)
		total += fi.Size()
		f, err := os.Open(p)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r audit.Record
			require.NoError(t, json.Unmarshal(sc.Bytes(), &r), name)
			assert.Equal(t, "t1", r.TokenID)
			assert.LessOrEqual(t, len(r.Reason), 303, "reasons are clipped")
			assert.False(t, r.Time.IsZero())
		}
		f.Close()
	}
	_, err = os.Stat(filepath.Join(dir, "sub", "audit.log.3"))
	assert.True(t, os.IsNotExist(err), "only Keep old files")
	assert.LessOrEqual(t, total, int64(3*4096))

	var nilLog *audit.Log
	nilLog.Write(audit.Record{}) // a nil log writes nothing
	assert.NoError(t, nilLog.Close())
}
