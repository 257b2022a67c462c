package executor_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// snapshotHarness runs snapshot.py outside a kernel: a stand-in for IPython's
// get_ipython holds the namespace, and each check prints one line.
const snapshotHarness = `
import contextlib, io, sys
import numpy as np

class IP:
    def __init__(self, ns):
        self.user_ns, self.user_ns_hidden = ns, {}

def mod(ip):
    g = {"__name__": "_kernelbox_snapshot", "get_ipython": lambda: ip}
    exec(open(sys.argv[1]).read(), g)
    return g

def quiet(fn, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fn(*args)
    return out.getvalue()

tmp = sys.argv[2]
a = np.arange(3 << 17, dtype=np.float64)  # 3 MiB: out of band
ip = IP({"a": a, "df_like": {"k": [1, 2]}, "f": lambda x: x + 1, "g": (i for i in range(2)), "x": 41})
quiet(mod(ip)["_kb_save"], tmp + "/s2", 0)
back = IP({})
rep = quiet(mod(back)["_kb_load"], tmp + "/s2")
ns = back.user_ns
print("roundtrip", (ns["a"] == a).all() and ns["a"].flags.writeable and ns["f"](1) == 2 and ns["x"] == 41
      and ns["df_like"] == {"k": [1, 2]} and "g" not in ns and "not saved" in rep)

# a namespace past the limit is refused with nothing left behind
rep = quiet(mod(ip)["_kb_save"], tmp + "/big", 1 << 20)
import os
print("toobig", '"too_big": true' in rep and not any(n.startswith("big") for n in os.listdir(tmp)))

# every one-bit flip of a small snapshot is refused
small = IP({"x": 41, "v": np.arange(4.0)})
quiet(mod(small)["_kb_save"], tmp + "/s", 0)
good = open(tmp + "/s", "rb").read()
loaded, probe = 0, IP({})
load = mod(probe)["_kb_load"]
for i in range(len(good)):
    bad = bytearray(good)
    bad[i] ^= 1 << (i % 8)
    open(tmp + "/d", "wb").write(bad)
    probe.user_ns.clear()
    if '"ok": true' in quiet(load, tmp + "/d"):
        loaded += 1
print("flips", len(good), loaded)

# a format-1 snapshot (kernelbox before 2026-12-05) still loads
old = IP({})
quiet(mod(old)["_kb_load"], sys.argv[3])
print("v1", old.user_ns == {"x": 41, "s": "hi", "l": [1, 2, {"k": 3.5}]})

# half files a writer killed mid-save left are removed by the next save and the next
# load; a link among them is removed, not followed; other files stay
sd = tmp + "/sess"
os.mkdir(sd)
os.mkdir(sd + "/.kernelbox-checkpoint.tmp-dir")
outside = tmp + "/outside"
open(outside, "w").write("keep")
for n in (".kernelbox-checkpoint.tmp-99", ".kernelbox-snapshot.tmp-7"):
    open(sd + "/" + n, "wb").write(good[: len(good) // 2])
os.symlink(outside, sd + "/.kernelbox-snapshot.tmp-link")
open(sd + "/keep.tmp-1", "w").write("mine")
quiet(mod(small)["_kb_save"], sd + "/.kernelbox-checkpoint", 0)
after_save = sorted(os.listdir(sd))
open(sd + "/.kernelbox-snapshot.tmp-8", "wb").write(good[:10])
probe.user_ns.clear()
rep = quiet(load, sd + "/.kernelbox-checkpoint")
print("sweep", after_save == [".kernelbox-checkpoint", ".kernelbox-checkpoint.tmp-dir", "keep.tmp-1"]
      and sorted(os.listdir(sd)) == after_save and open(outside).read() == "keep"
      and '"ok": true' in rep and probe.user_ns["x"] == 41, after_save)
`

// TestSnapshotFormat checks snapshot.py's file format without a kernel: a round
// trip with an out-of-band array, a namespace past the limit, every one-bit flip of
// a small snapshot refused, a format-1 file from an older kernelbox loaded, and the
// half files of a writer killed mid-save removed by the next save and load.
func TestSnapshotFormat(t *testing.T) {
	py := testenv.Jupyter(t)
	testenv.Imports(t, py, "numpy", "dill")
	v1, err := filepath.Abs("testdata/snapshot-v1.bin")
	require.NoError(t, err)
	out, err := exec.Command(py, "-c", snapshotHarness, "snapshot.py", t.TempDir(), v1).CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Equal(t, "roundtrip True", lines[0], "%s", out)
	require.Equal(t, "toobig True", lines[1], "%s", out)
	require.Regexp(t, `^flips \d+ 0$`, lines[2], "a flipped bit was loaded: %s", out)
	require.Equal(t, "v1 True", lines[3], "%s", out)
	require.True(t, strings.HasPrefix(lines[4], "sweep True "), "a half file was left or the wrong file removed: %s", out)
}
