#!/usr/bin/env bash
# Brings up a three-node Docker Swarm on this machine for kernelbox's swarm tests: one
# dockerd per node, each in a network namespace of its own, joined by a bridge in a
# "switch" namespace, so traffic between nodes is real VXLAN. Needs root.
#
# Usage: scripts/swarmlab/up.sh          prints the lab directory on its last line
#   node sockets: $LAB/n1/docker.sock ... $LAB/n3/docker.sock (n1 is the manager)
#   env: SWARMLAB_ROOT (default /tmp/kernelbox-swarmlab), SWARMLAB_OWNER (the pid the
#   lab lives for; default the caller's), SWARMLAB_DRIVER (default overlay2 where the
#   kernel mounts an overlay on the lab's filesystem, else fuse-overlayfs).
#
# Every name is unique per run: the lab's id (6 hex digits) is in its directory and in
# each namespace's name (kbsw-ID, kbn1-ID, ...); no interface is ever made in the host's
# namespace, and the addresses are private to the lab's own namespaces, so labs running
# at once do not collide. A watchdog tears the lab down when its owner process ends
# (even by SIGKILL), and every start first tears down labs whose owner is gone.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${SWARMLAB_ROOT:-/tmp/kernelbox-swarmlab}
owner=${SWARMLAB_OWNER:-$PPID}
[ "$(id -u)" = 0 ] || { echo "swarmlab: needs root (network namespaces, dockerd)" >&2; exit 1; }
for c in dockerd docker ip nsenter unshare; do
  command -v $c >/dev/null || { echo "swarmlab: $c is missing" >&2; exit 1; }
done
mkdir -p "$root"
"$here/clean.sh" "$root" >&2 || true

id=$(head -c3 /dev/urandom | od -An -tx1 | tr -d ' \n')
LAB=$root/$id
mkdir "$LAB"
# owner: the pid and its start time (field 22 of /proc/PID/stat), so a reused pid is not
# taken for the owner.
echo "$owner $(awk '{sub(/.*\) /, ""); print $20}' /proc/$owner/stat)" > "$LAB/owner"
echo "$id" > "$LAB/id"
trap 'rc=$?; if [ $rc != 0 ]; then echo "swarmlab: up failed; tearing down $LAB" >&2; "$here/down.sh" "$LAB" >&2; fi' EXIT

# The node daemons' storage driver: the kernel's overlay where it can mount one here
# (a session then costs about 1 CPU-second less than with fuse-overlayfs, whose
# userspace daemon serves every file a starting Python imports), else fuse-overlayfs.
if [ -z "${SWARMLAB_DRIVER:-}" ]; then
  SWARMLAB_DRIVER=fuse-overlayfs
  p=$LAB/overlay-probe
  mkdir -p "$p/l" "$p/u" "$p/w" "$p/m"
  if mount -t overlay overlay -o "lowerdir=$p/l,upperdir=$p/u,workdir=$p/w" "$p/m" 2>/dev/null; then
    umount "$p/m"
    SWARMLAB_DRIVER=overlay2
  fi
  rm -rf "$p"
fi
echo "swarmlab: storage driver $SWARMLAB_DRIVER" >&2

sw=kbsw-$id
ip netns add $sw
ip netns exec $sw ip link set lo up
ip netns exec $sw ip link add br0 type bridge
ip netns exec $sw ip link set br0 up
for i in 1 2 3; do
  n=kbn$i-$id
  ip netns add $n
  ip netns exec $n ip link set lo up
  # Made inside the switch namespace, so no name ever exists in the host's.
  ip netns exec $sw ip link add v$i type veth peer name eth0 netns $n
  ip netns exec $sw ip link set v$i master br0 up
  ip netns exec $n ip addr add 10.99.0.1$i/24 dev eth0
  ip netns exec $n ip link set eth0 up
  mkdir -p "$LAB/n$i/data" "$LAB/n$i/exec"
  # --config-file keeps the host's /etc/docker/daemon.json out; no-new-privileges here
  # is the only way to get NoNewPrivs=1 in swarm tasks (Engine 20.10 drops the service
  # spec's field). The bridge and address pools live in the node's namespace only.
  cat > "$LAB/n$i/daemon.json" <<J
{"storage-driver": "$SWARMLAB_DRIVER", "no-new-privileges": true,
 "bip": "10.98.$i.1/24", "default-address-pools": [{"base": "10.97.$i.0/24", "size": 28}]}
J
done

d() { local n=$1; shift; docker -H "unix://$LAB/n$n/docker.sock" "$@"; }
start() {
  setsid "$here/startd.sh" "$LAB" $1 kbn$1-$id > "$LAB/n$1/dockerd.log" 2>&1 < /dev/null &
}
ready() {
  for t in $(seq 1 120); do d $1 version >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "swarmlab: dockerd of n$1 did not come up:" >&2; tail -20 "$LAB/n$1/dockerd.log" >&2; return 1
}
start 1
ready 1
if [ -n "${SWARMLAB_IMAGES:-}" ]; then
  # Images reach n1 by `docker save | load` from the host's daemon; n2 and n3 get a
  # copy of n1's image store before their daemons start, its layer files hard-linked
  # (never written: a container's writes go to its own upper layer), which takes a
  # second where two more loads of a 1.3 GB image take a minute on 2 cores.
  t0=$(date +%s%N)
  # shellcheck disable=SC2086
  docker save $SWARMLAB_IMAGES | d 1 load -q >&2
  drv=$SWARMLAB_DRIVER
  for i in 2 3; do
    mkdir -p "$LAB/n$i/data/image"
    cp -a "$LAB/n1/data/image/$drv" "$LAB/n$i/data/image/"
    cp -al "$LAB/n1/data/$drv" "$LAB/n$i/data/"
  done
  echo "swarmlab: images $SWARMLAB_IMAGES on all nodes in $(( ($(date +%s%N) - t0) / 1000000 )) ms" >&2
fi
start 2; start 3
ready 2; ready 3
d 1 swarm init --advertise-addr 10.99.0.11 --default-addr-pool 10.96.0.0/16 --default-addr-pool-mask-length 24 >/dev/null
tok=$(d 1 swarm join-token -q worker)
for i in 2 3; do d $i swarm join --token "$tok" 10.99.0.11:2377 >/dev/null; done
for i in 1 2 3; do d 1 node update --label-add kb.node=n$i "$(d $i info --format '{{.Swarm.NodeID}}')" >/dev/null; done
for t in $(seq 1 60); do
  [ "$(d 1 node ls --format '{{.Status}}' | grep -c Ready)" = 3 ] && break; sleep 0.5
done
[ "$(d 1 node ls --format '{{.Status}}' | grep -c Ready)" = 3 ] || { d 1 node ls >&2; echo "swarmlab: nodes not Ready" >&2; exit 1; }

# The watchdog: tears the lab down once its owner is gone, however it ended.
setsid "$here/watch.sh" "$LAB" > "$LAB/watch.log" 2>&1 < /dev/null &
echo $! > "$LAB/watch.pid"
trap - EXIT
echo "$LAB"
