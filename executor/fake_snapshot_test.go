package executor_test

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/jupyter/jupytertest"
)

// dirPlacement is a fake placement whose kernel sees the session directory at its
// host path, as a local kernel does, so that its sessions can hibernate.
type dirPlacement struct{ *fakePlacement }

var _ executor.SessionDirer = (*dirPlacement)(nil)

func (p *dirPlacement) KernelDir(hostDir string) string { return hostDir }

// fakeSnapMarker starts the report line of snapshot.py, which the executor reads.
const fakeSnapMarker = "\x1ekernelbox-snapshot "

// snapshot is the fake kernel's snapshot.py: the executor's snapshot cell is
// exec(<source>, ...) whose source ends with the call, _kb_save(path, limit) or
// _kb_load(path). A save writes the kernel's variables to path as JSON; a load
// reads them back. Called with the script's lock held.
func (fk *fakeKernel) snapshot(k *jupytertest.Kernel, req *jupyter.Message, code string) {
	var src string
	_ = json.NewDecoder(strings.NewReader(strings.TrimPrefix(code, "exec("))).Decode(&src)
	lines := strings.Split(strings.TrimSpace(src), "\n")
	call := lines[len(lines)-1]
	fn, args, _ := strings.Cut(call, "(")
	var path string
	_ = json.NewDecoder(strings.NewReader(args)).Decode(&path)
	report := map[string]any{}
	switch fn {
	case "_kb_save":
		b, _ := json.Marshal(fk.vars)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			report["error"] = err.Error()
			break
		}
		report["ok"], report["bytes"], report["names"] = true, len(b), slices.Sorted(maps.Keys(fk.vars))
	case "_kb_load":
		b, err := os.ReadFile(path)
		vars := map[string]string{}
		if err == nil {
			err = json.Unmarshal(b, &vars)
		}
		if err != nil {
			report["lost"] = "missing or unreadable: " + err.Error()
			break
		}
		maps.Copy(fk.vars, vars)
		report["ok"], report["bytes"], report["restored"] = true, len(b), slices.Sorted(maps.Keys(vars))
	default:
		report["error"] = "the fake kernel does not know " + fn
	}
	line, _ := json.Marshal(report)
	k.Stream(req, "stdout", fakeSnapMarker+string(line)+"\n")
}
