// Package executor runs agents' Python code in stateful Jupyter kernels, one kernel per
// session, on a pluggable Backend.
//
// Start reading at [Executor] and [Executor.Execute]: a [Request] names a session, the
// code and the host files to stage; the executor checks the request against the
// permission policy, finds or starts the session's kernel on the backend, stages the
// inputs, runs the code over the kernel gateway protocol (package jupyter), collects
// what the code wrote to outputs/ as artifacts, and returns a [Result] whose outputs
// are in nbformat v4 shape.
//
// The [Backend] interface (backend.go) is the only thing that differs between running
// kernels in a local process, in a Docker container or on a remote gateway; everything
// in this package is the same for all of them.
//
// Files by concern: executor.go (the public methods), session.go and job.go (a
// session's one worker and its jobs), run.go (one call), kernel.go (starting a
// kernel), connect.go (connecting to it), liveness.go and precall.go (is it still
// there: recover after a death, the check before a call is sent), kernelstop.go
// (restart and shutdown), pool.go and warm.go (warm pools), template.go and
// preload.go (templates), callfiles.go (a call's files: staging its inputs,
// collecting its artifacts), output.go (iopub messages to nbformat outputs, one
// method per message type) and facts.go (building the Result), files.go,
// fileops.go and sessionfiles.go (the session files API), cull.go (idle sessions),
// durable.go, hibernate.go, fork.go and snapshot.go with snapshot.py (hibernate,
// resume and fork: the namespace saved and restored by the session's own kernel),
// keepstate.go and adopt.go (sessions kept across a restart: Options.StateDir,
// Options.OnClose, the Reattacher backend ability).
//
// Guarantees: a call returns within its timeout plus a bounded grace with an honest
// status; a session whose kernel was restarted says so (Result.StateLost); output is
// capped per call and truncation is reported; calls on one session run in arrival
// order; sessions, queues and output are bounded.
package executor
