package executor

import (
	"time"

	"github.com/kernelbox/kernelbox/api"
)

// Observer receives the executor's events, for metrics. Its methods are called from
// many goroutines and must be fast and safe for concurrent use.
type Observer interface {
	// CallFinished is called once per call that ran or was denied, with its status
	// and duration.
	CallFinished(status api.Status, d time.Duration)
	// KernelStarted is called when a kernel was started (for a session or the warm
	// pool).
	KernelStarted()
	// KernelDied is called when a call finds its kernel dead.
	KernelDied()
	// ArtifactsCollected is called after a call with the artifacts it produced.
	ArtifactsCollected(count int, bytes int64)
}

// nopObserver is the default Observer.
type nopObserver struct{}

func (nopObserver) CallFinished(api.Status, time.Duration) {}
func (nopObserver) KernelStarted()                         {}
func (nopObserver) KernelDied()                            {}
func (nopObserver) ArtifactsCollected(int, int64)          {}

// SnapshotObserver is implemented by Observers that also count hibernation (the
// executor finds it by type assertion on Options.Observer).
type SnapshotObserver interface {
	// SnapshotTaken is called after a snapshot of bytes was written in d.
	SnapshotTaken(bytes int64, d time.Duration)
	// SnapshotRestored is called after a snapshot was loaded in d.
	SnapshotRestored(d time.Duration)
	// Hibernated is called with +1 when a session hibernates and -1 when it
	// wakes or is closed while hibernated.
	Hibernated(delta int)
}

func (nopObserver) SnapshotTaken(int64, time.Duration) {}
func (nopObserver) SnapshotRestored(time.Duration)     {}
func (nopObserver) Hibernated(int)                     {}

// snapObserver returns o's SnapshotObserver, or one that does nothing.
func snapObserver(o Observer) SnapshotObserver {
	if so, ok := o.(SnapshotObserver); ok {
		return so
	}
	return nopObserver{}
}
