package executor_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/testkit/testnet"
)

// wheelName is the test package's wheel, served by a test host as a package
// index (PEP 503: simple/kbdemo/index.html links to it with its hash).
const wheelName = "kbdemo-0.1-py3-none-any.whl"

// writePackageIndex builds a pure-Python wheel (kbdemo, ANSWER = 42) and a
// simple index for it under dir, the test host's web root.
func writePackageIndex(t *testing.T, dir string) {
	t.Helper()
	files := []struct{ name, body string }{
		{"kbdemo/__init__.py", "ANSWER = 42\n"},
		{"kbdemo-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: kbdemo\nVersion: 0.1\n"},
		{"kbdemo-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: kernelbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		require.NoError(t, err)
		_, err = w.Write([]byte(f.body))
		require.NoError(t, err)
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString("kbdemo-0.1.dist-info/RECORD,,\n")
	w, err := zw.Create("kbdemo-0.1.dist-info/RECORD")
	require.NoError(t, err)
	_, err = w.Write([]byte(record.String()))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, wheelName), buf.Bytes(), 0o644))
	sum := sha256.Sum256(buf.Bytes())
	index := filepath.Join(dir, "simple", "kbdemo")
	require.NoError(t, os.MkdirAll(index, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(index, "index.html"), []byte(fmt.Sprintf(
		"<!DOCTYPE html><html><body><a href=\"../../%s#sha256=%s\">%s</a></body></html>\n",
		wheelName, hex.EncodeToString(sum[:]), wheelName)), 0o644))
}

// pipInstall runs pip inside the session, as an agent would, against the
// allowed test index over HTTPS (through kernelbox's proxy: the kernel has no
// other route; the template's PIP_CERT names the test CA, as an operator's
// would for a private index), then imports what it installed in the same kernel.
func pipInstall(t *testing.T, exec func(string) *api.Result, secure *testnet.Host) {
	t.Helper()
	r := exec(`import subprocess, sys
p = subprocess.run([sys.executable, "-m", "pip", "install", "--index-url", "https://secure.test:8443/simple/", "kbdemo"],
                   capture_output=True, text=True, timeout=180)
print(p.returncode)
print(p.stdout[-3000:], p.stderr[-3000:])`)
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.True(t, strings.HasPrefix(r.Stdout, "0\n"), "pip install failed:\n%s", r.Stdout)
	require.Contains(t, r.Stdout, "Successfully installed kbdemo-0.1")
	require.True(t, hasNote(r.Notes, "network: allow secure.test:8443 via "+secure.Addr.String()), "%q", r.Notes)
	r = exec("import kbdemo\nkbdemo.ANSWER")
	require.Equal(t, api.StatusOK, r.Status, "%+v", r.Error)
	require.Equal(t, "42", r.Result)
}
