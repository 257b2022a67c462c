#!/usr/bin/env bash
# The Go half of `make test`: every package's tests with -race, one package at a time
# in the main lane, and the packages named by KERNELBOX_TEST_BESIDE (default: the swarm
# backend's, which runs a three-node lab of its own) in a second lane beside it.
#
# Why two lanes: the heavy packages keep the 2-core CI machine about 70% busy one at a
# time (executor 67%, swarm 74% of both cores, measured with /proc/stat), so the swarm
# package's 480 s fit beside the others. Every time bound in the tests must hold with
# another package's load beside it (DEVELOPERS.md), and this is that load.
# KERNELBOX_TEST_BESIDE="" runs everything in one lane (go test -p 1 ./..., as before);
# KERNELBOX_TEST_PKGS (default ./...) chooses the packages.
#
# Each lane's events go through internal/testlog (ok/FAIL lines, failed tests' output,
# the slowest tests). The second lane's report is printed when both have ended.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
beside=${KERNELBOX_TEST_BESIDE-./backends/swarm}
flags=(-race -count=1 -p 1 -timeout 60m -json)

$GO build -o bin/testlog ./internal/testlog
mod=$($GO list -m)
main=()
second=()
for p in $($GO list ${KERNELBOX_TEST_PKGS:-./...}); do
	in=0
	for b in $beside; do
		[ "$p" = "$mod/${b#./}" ] && in=1
	done
	if [ "$in" = 1 ]; then second+=("$p"); else main+=("$p"); fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pid=
if [ "${#second[@]}" -gt 0 ]; then
	echo "== go test: ${#main[@]} packages in the main lane; beside them: ${second[*]#"$mod/"}"
	( $GO test "${flags[@]}" "${second[@]}" | bin/testlog -slowest 15 >"$tmp/beside.txt" 2>&1 ) &
	pid=$!
fi
status=0
$GO test "${flags[@]}" "${main[@]}" | bin/testlog -slowest 30 || status=$?
if [ -n "$pid" ]; then
	bstatus=0
	wait "$pid" || bstatus=$?
	echo "== the lane beside (${second[*]#"$mod/"}):"
	cat "$tmp/beside.txt"
	[ "$bstatus" = 0 ] || status=$bstatus
fi
exit "$status"
