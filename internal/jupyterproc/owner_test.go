package jupyterproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// Only the runtime dirs of dead owners of this pid namespace are removed: not a live
// owner's, not one whose pid was reused by another process, not one without an owner
// file (it may be being made), not another namespace's.
func TestRemoveStale(t *testing.T) {
	tmp := t.TempDir()
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	deadPid := strconv.Itoa(dead.Process.Pid)
	self := strconv.Itoa(os.Getpid())
	ns := pidNamespace()
	owners := map[string]string{
		"kernelbox-dead":    deadPid + " 12345 " + ns,
		"kernelbox-reused":  self + " 1 " + ns, // this pid, another start time
		"kernelbox-live":    "",                // written by writeOwner
		"kernelbox-otherns": deadPid + " 12345 pid:[1]",
		"kernelbox-none":    "-",
		"other-dead":        deadPid + " 12345 " + ns,
	}
	for name, line := range owners {
		d := filepath.Join(tmp, name)
		require.NoError(t, os.Mkdir(d, 0o700))
		switch line {
		case "":
			require.NoError(t, writeOwner(d))
		case "-":
		default:
			require.NoError(t, os.WriteFile(filepath.Join(d, ownerFile), []byte(line+"\n"), 0o600))
		}
	}
	removed := RemoveStale(tmp)
	require.ElementsMatch(t, []string{filepath.Join(tmp, "kernelbox-dead"), filepath.Join(tmp, "kernelbox-reused")}, removed)
	for name := range owners {
		_, err := os.Stat(filepath.Join(tmp, name))
		gone := name == "kernelbox-dead" || name == "kernelbox-reused"
		require.Equal(t, gone, os.IsNotExist(err), name)
	}
}
