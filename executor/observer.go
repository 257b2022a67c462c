package executor

import "time"

// Observer receives the executor's events, for metrics. Its methods are called from
// many goroutines and must be fast and safe for concurrent use.
type Observer interface {
	// CallFinished is called once per call that ran or was denied, with its status
	// and duration.
	CallFinished(status Status, d time.Duration)
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

func (nopObserver) CallFinished(Status, time.Duration) {}
func (nopObserver) KernelStarted()                     {}
func (nopObserver) KernelDied()                        {}
func (nopObserver) ArtifactsCollected(int, int64)      {}
