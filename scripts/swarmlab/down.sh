#!/usr/bin/env bash
# Tears lab $1 down: stops each node's dockerd (by its pid file, never by name), deletes
# the lab's namespaces and its directory. Safe to run twice and on a half-made lab.
L=${1:?usage: down.sh LAB_DIR}
[ -f "$L/id" ] || { echo "swarmlab: $L is not a lab directory" >&2; exit 1; }
id=$(cat "$L/id")
case $id in *[!0-9a-f]*|'') echo "swarmlab: bad lab id in $L" >&2; exit 1;; esac
if [ -f "$L/watch.pid" ] && [ "$(cat "$L/watch.pid")" != "$$" ] && [ "${SWARMLAB_FROM_WATCH:-}" != 1 ]; then
  kill "$(cat "$L/watch.pid")" 2>/dev/null
fi
t0=$(date +%s%N)
for i in 3 2 1; do docker -H "unix://$L/n$i/docker.sock" swarm leave --force >/dev/null 2>&1; done
echo "swarmlab: left swarm $(( ($(date +%s%N) - t0) / 1000000 )) ms" >&2
pids=()
for i in 1 2 3; do
  f=$L/n$i/dockerd.pid
  [ -f "$f" ] || continue
  p=$(cat "$f")
  # Only a dockerd of this lab: its command line names this node's pid file.
  if tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -qF -- "--pidfile $f"; then
    kill -TERM "$p" 2>/dev/null && pids+=("$p")
  fi
done
for t in $(seq 1 60); do
  alive=0
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ $alive = 0 ] && break
  sleep 0.5
done
echo "swarmlab: daemons stopped $(( ($(date +%s%N) - t0) / 1000000 )) ms" >&2
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null; done
# Containers of a killed daemon: their shims hold the node's namespace; kill them by the
# lab's own exec root in their command line.
for p in $(pgrep -f -- "$L/n[123]/exec" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
for n in kbn1-$id kbn2-$id kbn3-$id kbsw-$id; do ip netns del $n 2>/dev/null; done
# Mounts left under the lab (overlay or fuse mounts of killed containers).
grep -F " $L/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
rm -rf "$L"
echo "swarmlab: removed $L $(( ($(date +%s%N) - t0) / 1000000 )) ms" >&2
