package jupyterproc

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// KernelName is the kernelspec kernelbox installs in a server's private data dir.
const KernelName = "kernelbox-python3"

// launcher starts ipykernel so that it dies with the Jupyter server that started it:
// PR_SET_PDEATHSIG makes the Linux kernel SIGKILL it when its parent exits, even by
// SIGKILL, so no kernel outlives kernelbox (the server itself is started the same way).
// ipykernel's own parent poller only notices reparenting to pid 1.
const launcher = `import sys
if sys.path and sys.path[0] == "":
    del sys.path[0]
import ctypes, os, signal
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
except Exception:
    pass
_ppid = os.environ.get("JPY_PARENT_PID", "")
if _ppid.isdigit() and os.getppid() != int(_ppid):
    os._exit(1)
from ipykernel import kernelapp
kernelapp.launch_new_instance()
`

// writeKernelSpec installs the kernelbox kernelspec under dataDir/kernels.
func writeKernelSpec(dataDir, python string) error {
	dir := filepath.Join(dataDir, "kernels", KernelName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("kernelspec: %w", err)
	}
	spec := map[string]any{
		"argv":           []string{python, "-Xfrozen_modules=off", "-c", launcher, "-f", "{connection_file}"},
		"display_name":   "Python 3 (kernelbox)",
		"language":       "python",
		"interrupt_mode": "signal",
		"env": map[string]string{
			"MPLBACKEND":                     "module://matplotlib_inline.backend_inline",
			"PYDEVD_DISABLE_FILE_VALIDATION": "1",
			"PYTHONDONTWRITEBYTECODE":        "1",
		},
		"metadata": map[string]any{"debugger": false},
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "kernel.json"), b, 0o600); err != nil {
		return fmt.Errorf("kernelspec: %w", err)
	}
	return nil
}
