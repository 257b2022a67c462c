// Package remote is kernelbox's remote backend: it places sessions on existing
// Jupyter servers reached by URL and token - Jupyter Server, Kernel Gateway, or
// Enterprise Gateway, which runs each kernel in its own pod on Kubernetes - over
// http or https. Several gateways form a rotation: each new session goes to the
// reachable gateway with the fewest kernels, and a gateway that fails its health
// check leaves the rotation, its sessions starting over elsewhere (their next call
// reports state_lost).
//
// The kernel does not see the host's session directory, so files move through the
// kernel itself: each session incarnation gets its own working directory on the
// remote side (<Options.Sync.RemoteDir>/<session id>-<random>, made empty, removed
// when the kernel shuts down, reaped when abandoned), inputs are pushed to its
// inputs/ and new or changed files of its outputs/ are pulled back after every
// call, as chunked base64 in silent execute requests that leave the user's
// execution count and history alone, with SHA-256 checked on both sides. From
// there the executor collects artifacts as for every backend. File sync needs an
// IPython kernel (ipykernel), which is what the Python kernelspecs of all three
// servers run.
//
// Start reading at [New] and [Options] (Options.Sync is kernelfs's own options);
// gateway.go holds the health checks and load, placement.go the [Placement], which
// signals a gateway that left the rotation through Lost and embeds the file sync
// it shares with the swarm backend (backends/internal/kernelfiles over package
// kernelfs: its Go client and the kernel-side Python module). keep.go and
// reattach.go keep sessions' kernels across a restart of kernelbox
// (Options.StateFile, executor.Reattacher): the gateway keeps the kernels, the
// backend keeps which session ran which kernel, and recognises its own kernels by
// their session directory.
package remote
