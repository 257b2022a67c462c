// Package swarm is kernelbox's scale-out backend on a real cluster engine: Docker
// Swarm. Each session is one swarm service (one replica, restart "none", endpoint mode
// dnsrr) on an internal, attachable overlay network of its own, placed by the swarm's
// scheduler on any node; kernelbox never picks a node. The service runs Jupyter Server
// on its overlay address with a per-session token delivered as a swarm secret, and is
// hardened as far as the engine honours a service spec (all capabilities dropped,
// read-only root with tmpfs /tmp and /workspace, pids, memory and CPU limits, a
// non-root user, docker-init as PID 1, no DNS resolver). What the engine drops from a
// service spec (NoNewPrivileges, seccomp) must come from each node's daemon config:
// the task refuses to start without NoNewPrivs=1, and New and Health check the
// manager's daemon.
//
// A host process cannot join an overlay network, so kernelbox itself runs as a
// container on a manager (Options.Self) and attaches that container to each session's
// network to reach the task's address. Session files are not on kernelbox's host:
// they move through the kernel itself (package kernelfs), as for the remote backend.
//
// Start reading at [New] and [Backend.Open] (open.go: the launch steps with their
// undo list); spec.go builds the service around the hardened container the docker
// backend shares (backends/internal/sandbox); watch.go tells a session when its task or
// node is gone; egress.go serves a template's network allowlist through kernelbox's
// egress proxy on kernelbox's own address on the session's network; owner.go labels
// and reaps what a dead kernelbox left; keep.go and reattach.go keep the sessions'
// services across a restart of kernelbox (Options.StateFile, executor.Reattacher).
// Facts about the engine this relies on are in docs/swarm.md.
package swarm
