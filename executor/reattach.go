package executor

import "context"

// Reattacher is implemented by backends whose placements can outlive kernelbox's
// process (docker containers, swarm services): a server started again on the same workspace and
// owner takes back its sessions, with their kernels and variables (adopt.go). The
// backend keeps, in its own private state, what reaching its placements again
// takes; the executor keeps which session ran which kernel (Options.StateDir).
type Reattacher interface {
	// Reattach returns the placements an earlier process of this backend left
	// for the next one (after a SIGKILL, or Detach), each with the session it
	// served. A placement the backend kept but cannot take back (removed or
	// stopped meanwhile) comes with Lost set to why, and no Placement. The
	// executor calls it once, from New, before any session is placed, and closes
	// the placements it does not claim. An error says why nothing was kept (a
	// corrupt state file): what the backend found is then reaped as leftovers.
	Reattach(ctx context.Context) ([]Reattached, error)

	// Detach ends this process's hold on its placements without stopping them,
	// in place of Close (the "keep" stop policy): they stay listed in the
	// backend's state for the next process. Placements that cannot be taken back
	// later are closed. After Detach the backend is closed.
	Detach(ctx context.Context) error
}

// Reattached is one placement a Reattacher took back.
type Reattached struct {
	// Session is the id of the session the placement served.
	Session string
	// Placement is the placement, running, with its Server as before; nil when
	// Lost is set.
	Placement Placement
	// Lost says why the placement could not be taken back, or is "".
	Lost string
	// KernelID, when set, is the kernel the backend recognised as the session's
	// on the placement's server (a server with many clients' kernels, such as a
	// remote gateway): the executor takes the session back only when its own
	// record names the same kernel, and otherwise closes the placement.
	KernelID string
}
