package docker

import (
	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
	"github.com/kernelbox/kernelbox/executor"
)

// Limits returns what one session gets from o, with o's defaults applied: its
// image and container limits. `kernelbox serve` shows them and caps every
// template with them, and the tests derive theirs here too, so the two never
// differ. A limit that is off (negative in o) is 0.
func (o Options) Limits() executor.Limits {
	return sandbox.Settings{
		Image: o.Image, MaxLifetime: o.MaxLifetime, Memory: o.Memory, CPUs: o.CPUs, PidsLimit: o.PidsLimit,
	}.Limits()
}
