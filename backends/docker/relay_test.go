package docker

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/executor"
)

// TestRelayOnRunc runs the relay transport under runc beside the pinned socket
// and logs what the relay costs: the trivial cell's p50 and 10 MiB of stdout
// over each (README, "gVisor"). The relay under runc is also what
// Options.Transport = TransportRelay gives an operator whose runc host cannot
// reach /proc/<pid>/root.
func TestRelayOnRunc(t *testing.T) {
	t.Parallel()
	pinned, _ := newTestBackend(t, Options{})
	relayed, _ := newTestBackend(t, Options{Transport: TransportRelay})
	for _, c := range []struct {
		name string
		b    *Backend
	}{{"pinned", pinned}, {"relay", relayed}} {
		p := openPlacement(t, c.b, executor.SessionSpec{ID: "transport-" + c.name, Dir: sessionDir(t)})
		if got := p.relay != nil; got != (c.name == "relay") {
			t.Fatalf("%s: relay %v", c.name, got)
		}
		srv := p.Server()
		k := dialKernel(t, srv, startKernel(t, srv))
		k.run("x = 0")
		var took []time.Duration
		for i := range 100 {
			t0 := time.Now()
			if r := k.execute("x = "+strings.Repeat("1", 1+i%3)+"; x + 1", 30*time.Second); r.Status != "ok" {
				t.Fatalf("%s: %+v", c.name, r)
			}
			took = append(took, time.Since(t0))
		}
		slices.Sort(took)
		t0 := time.Now()
		out := k.run("import sys; sys.stdout.write('x' * (10 << 20))")
		stream := time.Since(t0)
		if len(out) != 10<<20 {
			t.Fatalf("%s: 10 MiB of stdout arrived as %d bytes", c.name, len(out))
		}
		t.Logf("%s under runc: trivial cell p50 %s p99 %s; 10 MiB of stdout %s", c.name,
			took[len(took)/2].Round(10*time.Microsecond), took[len(took)*99/100].Round(10*time.Microsecond), stream.Round(time.Millisecond))
	}
}
