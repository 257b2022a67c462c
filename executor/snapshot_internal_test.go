package executor

import (
	"strings"
	"testing"
)

// TestSnapshotTempNames: snapshot.py writes a snapshot or checkpoint to
// "<name>.tmp-<pid>" and sweeps the half files of those two names; its list must
// name the files this package calls SnapshotFile and CheckpointFile (fork.go
// leaves out the same temporary names).
func TestSnapshotTempNames(t *testing.T) {
	if !strings.Contains(snapshotPy, `tmp = "%s.tmp-%d" % (path, os.getpid())`) {
		t.Error("snapshot.py no longer writes to <name>.tmp-<pid>")
	}
	for _, name := range []string{SnapshotFile, CheckpointFile} {
		if !strings.Contains(snapshotPy, `"`+name+`.tmp-"`) {
			t.Errorf("snapshot.py's _KB_TEMPS does not name %s's temporary files", name)
		}
	}
}
