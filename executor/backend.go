package executor

import (
	"context"
	"encoding/json"

	"github.com/kernelbox/kernelbox/jupyter"
)

// Backend decides where a session's kernel runs: it provides, per session, a Jupyter
// server on which the executor starts that session's kernel. Everything above the
// backend (the protocol, files, policy, results) is the same for every backend.
//
// Implementations must be safe for concurrent use.
type Backend interface {
	// Name is the backend's short name ("none", "local", "docker", "remote").
	Name() string

	// Open places one session: it returns a Jupyter server on which the session's
	// kernel may be started, with the session's files visible to the kernel at
	// Server.KernelPath. Open may start processes or containers; the returned
	// Placement releases them.
	Open(ctx context.Context, spec SessionSpec) (Placement, error)

	// Close releases everything the backend started, including placements that
	// were not closed. The context bounds the teardown.
	Close(ctx context.Context) error
}

// SessionSpec describes one session to place.
type SessionSpec struct {
	// ID is the session id, or a placeholder of the form ".warm-…" for warm-pool
	// members that have no session yet (Warm). Used for labels and logs.
	ID string

	// Warm says the placement is a warm pool's member, opened before any session
	// takes it; when one does, a placement that is an Adopter is told its id.
	Warm bool

	// Dir is the host path of the session directory, holding inputs/ and outputs/.
	// A warm-pool member's directory is renamed to its session's when it is taken,
	// so backends must refer to Dir by what they opened (a bind mount, a kernel's
	// cwd), not by re-reading the path later.
	Dir string

	// Data lists host directories to expose read-only at data/<Name> in the session
	// (the server's and the template's).
	Data []DataMount

	// Template is the session's template. Its zero fields mean the backend's own
	// settings; a backend applies the fields it says it does (SpecApplier) and the
	// executor refuses templates that set others, so a backend may ignore them.
	Template Template
}

// DataMount is a host directory exposed read-only inside a session at data/<Name>.
type DataMount struct {
	Name    string
	HostDir string
}

// Placement is where one session's kernel runs.
type Placement interface {
	// Server returns how to reach the Jupyter server and which kernel to start.
	// It is constant for the life of the placement.
	Server() Server

	// Close releases what Open started for this session (for example its
	// container). The kernel itself has already been shut down by the executor,
	// or is gone.
	Close(ctx context.Context) error
}

// Server tells the executor how to start a session's kernel.
type Server struct {
	// Endpoint reaches the Jupyter server.
	Endpoint jupyter.Endpoint

	// KernelName is the kernelspec to start. Empty means the server's default.
	KernelName string

	// KernelPath is the kernel's working directory relative to the server's root
	// directory; the session's inputs/ and outputs/ are found relative to it.
	KernelPath string

	// KernelEnv is passed in the start request's "env" (Enterprise Gateway reads
	// KERNEL_* variables from it). Nil sends none.
	KernelEnv map[string]string
}

// Diagnoser is implemented by placements that can explain why a kernel died, for
// example a container that was OOM-killed. Diagnose returns a short human-readable
// cause, or "" when none is known.
type Diagnoser interface {
	Diagnose(ctx context.Context) string
}

// Adopter is implemented by placements that show, where an operator looks, which
// session they serve (a container's name in `docker ps`). A warm pool's placement is
// opened for a placeholder session (SessionSpec.Warm); when a session takes its
// kernel, the executor calls Adopt with the session's id before the session's first
// call runs. An error is logged and the session keeps the kernel.
type Adopter interface {
	Adopt(ctx context.Context, session string) error
}

// EarlyAdopter is an Adopter whose Adopt is slow (a round trip to an engine, a
// state file fsynced) and needed by the session's calls only in part: AdoptNow,
// which must not block, does that part (docker: the egress proxy's records and
// budget become the session's), and the executor calls it before the session's
// first call runs; Adopt then runs once that call ended (or beside it, after
// 2 s), bounded as always (issue 53: a container's rename held the first result up by
// 45 to 70 ms).
type EarlyAdopter interface {
	Adopter
	AdoptNow(session string)
}

// KernelLogger is implemented by placements that can show what their Jupyter server
// logged about one kernel, for example why it gave up restarting a kernel that kept
// dying while it started. KernelLog returns the last such lines, or "" when there are
// none or they cannot be read.
type KernelLogger interface {
	KernelLog(ctx context.Context, kernelID string) string
}

// NetworkReporter is implemented by placements whose kernel reaches the network
// through kernelbox's egress proxy (a template's Network). TakeNetwork reports
// the proxy connections that ended since it was last called; the executor adds
// its notes to each call's Result after the code ran and hands its counts to a
// NetworkObserver. A connection still open when a call ends is reported with a
// later call.
type NetworkReporter interface {
	TakeNetwork() NetworkReport
}

// NetworkReport is what a session's proxy connections did since the last report.
type NetworkReport struct {
	// Notes has one line per connection, refusals with the rule that refused
	// them, in a bounded list (the rest counted in a last note).
	Notes []string
	// Allowed and Refused count the connections; Up and Down their bytes.
	Allowed, Refused int
	Up, Down         int64
}

// NetworkObserver is implemented by Observers that count egress connections
// (metrics). NetworkReported is called after each call whose session reported any.
type NetworkObserver interface {
	NetworkReported(NetworkReport)
}

// HealthChecker is implemented by backends that can report whether they can place
// sessions right now (a reachable Docker daemon, a running server).
type HealthChecker interface {
	Health(ctx context.Context) error
}

// DataMounter is implemented by backends that expose SessionSpec.Data themselves, for
// example as read-only bind mounts. For other backends the executor copies each data
// directory into the session (read-only files, no symlinks) before its kernel starts.
type DataMounter interface {
	MountsData() bool
}

// StateKeeper is implemented by backends that keep files of their own on the host,
// such as socket directories holding a server's token. The executor adds StateDirs
// to the workspace's private directories (workspace.Manager.Protect), so no call
// can stage an input from them, whatever the policy allows. It is asked once, in New.
type StateKeeper interface {
	StateDirs() []string
}

// FileSyncer is the one optional interface for files that live in the kernel:
// implemented by placements whose kernels do not see the host's session directory (a
// remote gateway, a swarm task). The executor keeps the workspace contract for them: it
// stages inputs into the host session directory as usual, then calls PushInputs (with
// the staged names, and with none for a fresh kernel, which must create inputs/ and
// outputs/ in its working directory); after every call it calls PullOutputs, which
// copies new or changed files under the kernel's outputs/ into hostDir/outputs/,
// before artifacts are collected from there. conn is the session's kernel connection,
// lent for the duration of the call: a placement must not keep it.
//
// The executor calls these methods from the session's worker, one at a time.
type FileSyncer interface {
	PushInputs(ctx context.Context, conn *jupyter.Conn, hostDir string, names []string) error

	// OutputsProbe returns a Python expression whose value tells whether the
	// kernel's outputs/ changed, or "" for none. The executor adds it to each call's
	// execute_request as the user expression "kernelbox_outputs", which saves a round
	// trip per call.
	OutputsProbe() string

	// PullOutputs copies what changed. probe is the probe expression's result from
	// the call's execute_reply, or nil when there is none (no probe was asked for,
	// or the code raised, timed out or the kernel died): the syncer then looks for
	// itself.
	PullOutputs(ctx context.Context, conn *jupyter.Conn, hostDir string, probe json.RawMessage) error

	// KernelFiles returns the session's files in the kernel, for the session
	// files API, through conn, the session's kernel connection, lent for one job
	// on the session's worker (the files must not be used after it). The kernel's
	// session directory is set up (PushInputs ran on the kernel process) before.
	// An error (the placement's server is gone) fails the job with api.ErrBackend.
	KernelFiles(conn *jupyter.Conn, l FileLimits) (SessionFiles, error)
}

// LossReporter is implemented by placements whose server can go away for good while
// their session lives, for example a remote gateway that left the rotation. Lost
// returns a channel that is closed when that happens. The executor then closes the
// session's kernel connection (a call in flight ends as kernel_died, with Diagnoser's
// reason when the placement is one), and the session's next call starts a fresh
// kernel on a new placement instead of reconnecting, and reports state_lost.
type LossReporter interface {
	Lost() <-chan struct{}
}

// ResetReplacer is implemented by placements on which restarting a kernel in place
// is not a clean slate: a container keeps its processes, /tmp and home directory
// across a kernel restart, so what one kernel left there (a detached process, an
// IPython startup file) would live on in the next. When ReplaceOnReset reports true,
// a reset, and a restart after a call the kernel would not let go of, shut the kernel
// down with its placement and start a new kernel on a new placement instead; the
// session's files stay. Such a replacement is not reported as lost state beyond what
// a restart already reports.
type ResetReplacer interface {
	ReplaceOnReset() bool
}

// StartLimiter is implemented by backends whose sessions start on shared,
// limited resources (a cluster's nodes), where a burst of starts at once would
// have every start share the CPU until all are late together. MaxStarting
// returns how many kernels may be starting at once (placed, started, connected
// and prepared); 0 means no limit. It is asked once, in New (see
// Options.MaxStarting).
type StartLimiter interface {
	MaxStarting() int
}

// KernelWatcher is implemented by placements that can tell, without asking the
// kernel or its server, whether the kernel's process still runs (the local backend
// and docker find it in /proc). The executor calls WatchKernel after each connection
// to a kernel (a start, a restart, a reconnection after the server restarted it) and
// calls the returned exited before every call: a kernel killed in the moment after
// the previous call, before its server noticed, is then found dead before a call is
// sent to it, and the call runs on a fresh kernel, reporting state_lost, instead of
// being used up as kernel_died. exited must be cheap (microseconds), must not block
// and must be safe for concurrent use. The placement owns what the watch holds: it
// releases it at the next WatchKernel and at Close. An error means no such check
// for this kernel; calls go out as before.
type KernelWatcher interface {
	WatchKernel(ctx context.Context, kernelID string) (exited func() bool, err error)
}
