#!/usr/bin/env bash
# The Go half of `make test`: every package's tests with -race, one package at a time
# (-p 1), their events through internal/testkit/testlog (ok/FAIL lines, failed tests' output,
# the slowest tests), then the CPU-seconds they used. KERNELBOX_TEST_PKGS (default ./...)
# chooses the packages.
#
# One package at a time because two at once did not pay on the 2-core CI machine: each
# heavy package keeps both cores about 70% busy alone (executor 67%, swarm 74%, httpapi
# 69%, cmd/kernelbox 68%, from /proc/stat), and with the swarm package in a second lane
# (2026-12-05) make test took 2,400 s instead of 2,430, the other packages ran up to 2x
# slower beside it and two swarm tests failed their time bounds.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

# The race detector sleeps 1 s when each test binary exits (GORACE atexit_sleep_ms,
# default 1000), for goroutines still running to report their races: 40 packages,
# 40 s of make test (measured: every package with no test to run took 1.02 s). A race
# found while a test ran is reported then; the heavy packages' TestMains also fail
# on goroutines left running (internal/testkit/leakcheck). 100 ms is kept for a report still
# being written at exit. A GORACE of the caller's wins.
export GORACE=${GORACE:-atexit_sleep_ms=100}

$GO build -o bin/testlog ./internal/testkit/testlog
status=0
# shellcheck disable=SC2086 # KERNELBOX_TEST_PKGS is a list of package patterns
$GO test -race -count=1 -p 1 -timeout 60m -json ${KERNELBOX_TEST_PKGS:-./...} | bin/testlog -slowest 30 || status=$?

# The CPU the tests used, to compare runs by (wall time follows the host's load, CPU
# much less): user+sys of this script's children, go test, its builds, the test
# binaries and what they started (Jupyter Servers, kernels, kernelbox serves), but
# not the Docker daemon's or containers' processes, which are not our children.
# (times in this shell: in a subshell it counts that subshell's children.)
tfile=$(mktemp)
times >"$tfile"
read -r cu cs < <(sed -n 2p "$tfile")
rm -f "$tfile"
cpu() { awk -v t="$1" 'BEGIN { split(t, p, /[ms]/); printf "%.0f", p[1] * 60 + p[2] }'; }
echo "== go test: $(( $(cpu "$cu") + $(cpu "$cs") )) CPU-seconds (user $(cpu "$cu") s, sys $(cpu "$cs") s; Docker's and the containers' not counted)"
exit "$status"
