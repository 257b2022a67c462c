package serverflags

import (
	"strings"
	"testing"
)

func TestKernelLines(t *testing.T) {
	t.Parallel()
	const me, other = "a8cc7204-25a8-4b5b-867f-ffa88a909961", "0c0e2372-5def-4eb2-b070-abaa8729a7ea"
	log := strings.Split(`[I 07:30:45.540 ServerApp] Kernel started: `+other+`
[I 07:30:45.541 ServerApp] Kernel started: `+me+`
kernelbox test: this kernel exits as it starts

[I 07:30:46.054 ServerApp] AsyncIOLoopKernelRestarter: restarting kernel (3/5), new random ports
[W 07:30:47.594 ServerApp] AsyncIOLoopKernelRestarter: restart failed
[W 07:30:47.594 ServerApp] Kernel `+me+` died, removing from map.
[W 07:30:47.600 ServerApp] Kernel `+other+` died, removing from map.
[W 07:30:47.791 ServerApp] 404 GET /api/kernels/`+me+` (0.0.0.0): Kernel does not exist: `+me+`
[W 07:30:47.791 ServerApp] wrote error: 'Kernel does not exist: `+me+`'
[W 07:30:47.791 ServerApp] 404 GET /api/kernels/`+me+` (0.0.0.0) 0.76ms referer=None`, "\n")
	tests := []struct {
		name string
		id   string
		n    int
		want []string
	}{
		{"mine and unnamed, no requests", me, 10, []string{
			"[I 07:30:45.541 ServerApp] Kernel started: " + me,
			"kernelbox test: this kernel exits as it starts",
			"[I 07:30:46.054 ServerApp] AsyncIOLoopKernelRestarter: restarting kernel (3/5), new random ports",
			"[W 07:30:47.594 ServerApp] AsyncIOLoopKernelRestarter: restart failed",
			"[W 07:30:47.594 ServerApp] Kernel " + me + " died, removing from map.",
		}},
		{"the last n", me, 2, []string{
			"[W 07:30:47.594 ServerApp] AsyncIOLoopKernelRestarter: restart failed",
			"[W 07:30:47.594 ServerApp] Kernel " + me + " died, removing from map.",
		}},
		{"another kernel", other, 2, []string{
			"[W 07:30:47.594 ServerApp] AsyncIOLoopKernelRestarter: restart failed",
			"[W 07:30:47.600 ServerApp] Kernel " + other + " died, removing from map.",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, want := KernelLines(log, tt.id, tt.n), strings.Join(tt.want, "\n"); got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
	if got := KernelLines(nil, me, 5); got != "" {
		t.Errorf("empty log: got %q", got)
	}
}
