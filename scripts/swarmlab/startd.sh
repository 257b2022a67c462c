#!/usr/bin/env bash
# Starts dockerd for node $2 of lab $1 inside network namespace $3, with a fresh sysfs
# but the host's cgroup tree (plain `ip netns exec` hides the cgroup v1 mounts:
# "Devices cgroup isn't mounted").
set -eu
LAB=$1 i=$2 ns=$3
mkdir -p "$LAB/n$i/cgsave"
exec nsenter --net=/run/netns/$ns unshare -m --propagation private sh -c "
mount --rbind /sys/fs/cgroup '$LAB/n$i/cgsave' &&
mount -t sysfs sysfs /sys &&
mount --rbind '$LAB/n$i/cgsave' /sys/fs/cgroup &&
exec dockerd --config-file '$LAB/n$i/daemon.json' --data-root '$LAB/n$i/data' --exec-root '$LAB/n$i/exec' --pidfile '$LAB/n$i/dockerd.pid' -H 'unix://$LAB/n$i/docker.sock'"
