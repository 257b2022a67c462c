package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// browserNames are the Chromium binaries tried on PATH, Debian's chromium package first.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome"}

// Browser returns the path of a Chromium to drive headless, skipping or failing t
// (when KERNELBOX_REQUIRE_BROWSER=1, as CI sets) when there is none. KERNELBOX_CHROMIUM
// names one explicitly.
func Browser(t testing.TB) string {
	t.Helper()
	const env = "KERNELBOX_REQUIRE_BROWSER"
	if p := os.Getenv("KERNELBOX_CHROMIUM"); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			missing(t, env, "KERNELBOX_CHROMIUM="+p+" is not an executable: "+err.Error())
		}
		return path
	}
	for _, name := range browserNames {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	missing(t, env, "no Chromium found (Debian: apt-get install chromium, as scripts/setup.sh does)")
	return ""
}
