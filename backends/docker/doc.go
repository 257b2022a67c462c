// Package docker is kernelbox's docker backend: it places each session in its own
// hardened container running Jupyter Server on a unix socket, so the executor talks to
// the kernel exactly as it does with the local backend, while the code runs without a
// network, without capabilities, as an unprivileged user, on a read-only root file
// system, under memory, CPU and process limits, and for at most a fixed lifetime.
//
// Start reading at [New] and [Options] (every hardening setting and its default), then
// [Backend.Open], which creates, starts and waits for one container (container.go
// builds its configuration from the hardened container the swarm backend shares,
// backends/internal/sandbox; ready.go waits for the server). [Placement] is one running
// container; [Placement.Diagnose] explains why a kernel died (oom.go says how OOM kills
// are detected); exit.go watches each container and closes [Placement.Lost] when it
// stops while its session lives (docker kill or stop, the max lifetime), so that the
// session's next call gets a new container at once. owner.go labels containers with
// the process that created them so that a later process can reap the containers of
// one that crashed; adopt.go names each container after the session it serves (and
// renames a warm pool's container when a session takes it). keep.go and
// reattach.go keep the containers across a restart of kernelbox (Options.StateFile,
// [Backend.Reattach], [Backend.Detach]). image.go builds the kernel image from
// Debian packages without a registry. pylib.go copies each image's Python libraries
// once, per image id, into named volumes that its sessions mount read-only, so that
// their imports do not go through a slow storage driver (fuse-overlayfs).
//
// The Docker daemon must run on the same machine as kernelbox: session directories and
// each server's state directory are bind-mounted by host path, and under runc
// kernelbox reaches the server's socket through /proc/<pid>/root of the container's
// main process. Under another runtime (gVisor's runsc, [Options.Runtime], runtime.go)
// a relay in the container connects out to a socket in the state directory instead
// (relayprog.go is the relay, relay.go kernelbox's side, relayopen.go the steps of
// Open and of adoption that use it).
//
// Nothing a kernel writes outside /workspace reaches the host: the state directory
// (launcher, kernelspec, token) is mounted read-only at /run/kernelbox, data mounts
// are read-only, the shared Python libraries are read-only volumes that only the
// backend's fill container writes, and the server's socket is on the container's own /tmp tmpfs,
// pinned by descriptor before any kernel runs (see pinServerSocket in ready.go).
package docker
