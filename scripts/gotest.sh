#!/usr/bin/env bash
# The Go half of `make test`: every package's tests with -race, one package at a time
# (-p 1), their events through internal/testlog (ok/FAIL lines, failed tests' output,
# the slowest tests). KERNELBOX_TEST_PKGS (default ./...) chooses the packages.
#
# KERNELBOX_TEST_BESIDE names packages to run in a second lane beside the others, for
# a machine with cores to spare; it is empty by default because on the 2-core CI
# machine it did not pay: each heavy package keeps both cores about 70% busy alone
# (executor 67%, swarm 74%, httpapi 69%, cmd/kernelbox 68%, from /proc/stat), and with
# the swarm package beside the others (2026-12-05) make test took 2,400 s instead of
# 2,430, the main lane's packages ran up to 2x slower while it ran (remote 100 -> 206
# s, cmd/kernelbox 371 -> 444 s), the swarm package took 695 s instead of 484 and two
# of its tests failed (a docker container's server not ready after 60 s in a
# 24-session burst; a network attach past its deadline).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
beside=${KERNELBOX_TEST_BESIDE-}
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
