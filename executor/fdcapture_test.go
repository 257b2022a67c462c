package executor_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
)

// Bytes written to the kernel's fds 1 and 2 (by the kernel and by its subprocesses)
// reach the Result even when they are not UTF-8 or hold NULs; undecodable bytes are
// replaced and noted. ipykernel's fd capture used to stop for good at the first
// undecodable read, after which fd output was dropped silently and a subprocess
// writing 200 kB blocked until the call's timeout (issue 25 item 2).
func TestLocalFdOutputNotUTF8(t *testing.T) {
	e := newEnv(t, nil)
	r := e.run(t, "fd", `import os, subprocess, time
os.write(1, b'A\xff\xfeB\n')
os.write(2, b'E\x00\xffF\n')
subprocess.run(['sh', '-c', 'printf "S\\377T\\n"; printf "U\\000V\\n" >&2'])
time.sleep(0.5)`)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	t.Logf("stdout %q stderr %q notes %q", r.Stdout, r.Stderr, r.Notes)
	require.Contains(t, r.Stdout, "A\ufffd\ufffdB\n")
	require.Contains(t, r.Stdout, "S\ufffdT\n")
	require.Contains(t, r.Stderr, "E\x00\ufffdF\n")
	require.Contains(t, r.Stderr, "U\x00V\n")
	require.Contains(t, strings.Join(r.Notes, "\n"), "UTF-8")

	// Capture goes on: later fd output arrives, and a subprocess writing 200 kB
	// does not block.
	start := time.Now()
	r, err := e.Execute(t.Context(), api.Request{SessionID: "fd", Timeout: 20 * time.Second, Code: `import os, subprocess, time
os.system('echo after')
subprocess.run('head -c 200000 /dev/zero | tr "\\0" x', shell=True)
time.sleep(0.5)`})
	require.NoError(t, err)
	took := time.Since(start)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Contains(t, r.Stdout, "after\n")
	require.Equal(t, 200000, strings.Count(r.Stdout, "x"), "took %s", took)
	require.Less(t, took, 10*time.Second)
}
