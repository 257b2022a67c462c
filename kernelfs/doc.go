// Package kernelfs moves files between a host session directory and a remote
// kernel's working directory through the kernel itself, for kernelbox's remote and
// swarm backends, whose kernels do not see the host's files (their placements use
// it through backends/internal/kernelfiles).
//
// It has two halves. kernelsync.py runs inside the kernel, installed as a module of
// its own (never in the user's namespace), and does the file work there. [Kernel]
// is its typed Go client: one method per operation ([Kernel.Setup],
// [Kernel.Stat], [Kernel.Sums], [Kernel.WriteFile], [Kernel.BeginWrite],
// [Kernel.WriteChunk], [Kernel.EndWrite], [Kernel.List], [Kernel.ReadMany],
// [Kernel.OpenRead], [Kernel.ReadChunk], [Kernel.EndRead], ...), each sent as a
// silent execute_request that leaves the user's execution count and history alone,
// with bulk data riding in the request's content. On top of it, [Syncer] keeps
// what one session's kernel holds and implements the executor's FileSyncer:
// push.go pushes inputs, pull.go and fetch.go pull outputs back, contents.go is
// the optional Contents API upload path. SHA-256 is checked on both sides.
//
// Start reading at [New] and [Syncer]; kernel.go says how an operation reaches the
// kernel, ops.go lists the operations. The Python half has its own unittest suite
// (test_kernelsync.py, test_ipykernel_pin.py), run by `make pytest`.
package kernelfs
