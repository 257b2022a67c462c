// Package testenv decides whether integration tests can run here. Tests that need a
// real Jupyter Server or Docker engine call Jupyter or Docker: when the dependency is
// missing they skip, unless KERNELBOX_REQUIRE_JUPYTER=1 / KERNELBOX_REQUIRE_DOCKER=1 is
// set (CI sets both), in which case they fail, so CI can never pass by skipping.
package testenv

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/pyfind"
)

// Python returns an interpreter that can import jupyter_server and ipykernel, or ""
// and a reason.
func Python() (string, string) {
	p, err := pyfind.Find("")
	if err != nil {
		return "", err.Error()
	}
	return p, ""
}

// Jupyter returns the Python to run Jupyter Server with, skipping or failing t when
// there is none.
func Jupyter(t testing.TB) string {
	t.Helper()
	p, why := Python()
	if p == "" {
		missing(t, "KERNELBOX_REQUIRE_JUPYTER", why)
	}
	return p
}

// Docker skips or fails t when the Docker engine cannot be reached.
func Docker(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.APIVersion}}").CombinedOutput()
	if err != nil {
		missing(t, "KERNELBOX_REQUIRE_DOCKER", "docker engine unreachable: "+strings.TrimSpace(string(out)))
	}
}

// Short reports whether long integration tests should be cut down.
func Short() bool { return testing.Short() }

func missing(t testing.TB, env, why string) {
	t.Helper()
	if os.Getenv(env) == "1" {
		t.Fatalf("%s=1 but %s", env, why)
	}
	t.Skipf("skipping: %s (set %s=1 to make this a failure)", why, env)
}

// Image skips or fails t when the Docker engine cannot be reached or has no image
// named image.
func Image(t testing.TB, image string) {
	t.Helper()
	Docker(t)
	if out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", image).CombinedOutput(); err != nil {
		missing(t, "KERNELBOX_REQUIRE_DOCKER", "the kernel image "+image+" is missing (run `make image` or `kernelbox image build`): "+strings.TrimSpace(string(out)))
	}
}

// Imports skips or fails t (as Jupyter does) when py cannot import every module.
func Imports(t testing.TB, py string, modules ...string) {
	t.Helper()
	list := strings.Join(modules, ", ")
	if out, err := exec.Command(py, "-c", "import "+list).CombinedOutput(); err != nil {
		missing(t, "KERNELBOX_REQUIRE_JUPYTER", py+" cannot import "+list+" (see scripts/setup.sh): "+strings.TrimSpace(string(out)))
	}
}

// Containers lists the ids of kernelbox containers (running or not) whose owner label
// names process pid, as Docker reports them; other processes' containers (tests of
// other packages running in parallel) are not counted.
func Containers(t testing.TB, pid int) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label=io.kernelbox.created-by=kernelbox",
		"--format", `{{.ID}} {{.Label "io.kernelbox.owner"}}`).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	var ids []string
	prefix := strconv.Itoa(pid) + ":"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, owner, _ := strings.Cut(line, " ")
		if id != "" && strings.HasPrefix(owner, prefix) {
			ids = append(ids, id)
		}
	}
	return ids
}

// RKernel skips or fails t (as Jupyter does) when R with IRkernel, Debian's
// r-base-core and r-cran-irkernel that scripts/setup.sh installs, is missing.
func RKernel(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "Rscript", "-e", "library(IRkernel)").CombinedOutput(); err != nil {
		missing(t, "KERNELBOX_REQUIRE_JUPYTER", "R with IRkernel is missing (scripts/setup.sh installs r-base-core r-cran-irkernel): "+strings.TrimSpace(string(out)))
	}
}

// Swarm skips or fails t when the swarm lab (scripts/swarmlab) could not start: why
// says what went wrong, "" means it runs. KERNELBOX_REQUIRE_SWARM=1 (CI) makes it a
// failure.
func Swarm(t testing.TB, why string) {
	t.Helper()
	if why != "" {
		missing(t, "KERNELBOX_REQUIRE_SWARM", why)
	}
}

// SwarmRequired reports whether KERNELBOX_REQUIRE_SWARM=1 is set.
func SwarmRequired() bool { return os.Getenv("KERNELBOX_REQUIRE_SWARM") == "1" }

// Runsc skips or fails t (KERNELBOX_REQUIRE_RUNSC=1, which CI sets) unless the Docker
// engine is reachable and lists gVisor's runtime "runsc" (scripts/setup.sh --gvisor
// registers it).
func Runsc(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{json .Runtimes}}").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"runsc"`) {
		// An engine that does not answer fails too: a runsc test needs it.
		missing(t, "KERNELBOX_REQUIRE_RUNSC", "the Docker engine is unreachable or does not list the runtime runsc (register it: scripts/setup.sh --gvisor): "+strings.TrimSpace(string(out)))
	}
}
