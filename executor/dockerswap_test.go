package executor_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// Issue 20 item 4 against a real docker session: the kernel swaps a directory and a
// symlink to the host's ~/.ssh with renameat2(RENAME_EXCHANGE) in a loop, in the
// only host directory it can write (its own /workspace), while the host stages
// through that directory 1,000 times. Every staging is refused (session directories
// are kernelbox's own state) and none copies the secret.
func TestDockerStageSwapRace(t *testing.T) {
	e := newDockerEnv(t, testexec.Real{}, nil)
	secretDir := filepath.Join(e.Home, ".ssh")
	require.NoError(t, os.WriteFile(filepath.Join(secretDir, "f"), []byte("SECRET"), 0o600))
	r := e.run(t, "attacker", `import ctypes, os, threading
os.makedirs('d', exist_ok=True)
open('d/f', 'w').write('harmless')
if os.path.lexists('l'): os.remove('l')
os.symlink(`+"'"+secretDir+"'"+`, 'l')
libc = ctypes.CDLL(None, use_errno=True)
stop = threading.Event()
swaps = [0]
def swap():
    while not stop.is_set():
        if libc.renameat2(-100, b'd', -100, b'l', 2) == 0:
            swaps[0] += 1
threading.Thread(target=swap, daemon=True).start()
print(os.getcwd())`)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	hostDir := filepath.Join(e.WS.Root(), "sessions", "attacker")
	src := filepath.Join(hostDir, "d", "f")

	leaks, refused := 0, 0
	for range 1000 {
		r, err := e.Execute(context.Background(), api.Request{SessionID: "victim", Code: "print(open('inputs/f').read())", Inputs: []string{src}})
		switch {
		case errors.Is(err, api.ErrDenied):
			refused++
		case err != nil:
			t.Fatalf("staging failed without a denial: %v", err)
		case strings.Contains(r.Stdout, "SECRET"):
			leaks++
		}
	}
	r = e.run(t, "attacker", "stop.set(); print(swaps[0])")
	t.Logf("1,000 stagings through a directory the docker kernel swapped %s times: %d refused, %d leaked", strings.TrimSpace(r.Stdout), refused, leaks)
	require.Zero(t, leaks)
	require.Equal(t, 1000, refused)
	require.NotEqual(t, "0\n", r.Stdout, "the kernel did swap")
}
