package docker

import (
	"slices"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/executor"
)

// TestRelayOnRunc runs the relay transport under runc beside the pinned socket,
// interleaved so that both see the same load, and logs what the relay costs: the
// trivial cell's p50 and p99 and 10 MiB of stdout over each (README, "gVisor").
// The relay under runc is also what Options.Transport = TransportRelay gives an
// operator whose host cannot reach /proc/<pid>/root.
func TestRelayOnRunc(t *testing.T) {
	t.Parallel()
	type side struct {
		name   string
		k      *kernel
		cells  []time.Duration
		stream []time.Duration
	}
	var sides []*side
	for _, tr := range []string{TransportPinned, TransportRelay} {
		b, _ := newTestBackend(t, Options{Transport: tr})
		p := openPlacement(t, b, executor.SessionSpec{ID: "transport-" + tr, Dir: sessionDir(t)})
		if got := p.relay != nil; got != (tr == TransportRelay) {
			t.Fatalf("%s: relay %v", tr, got)
		}
		srv := p.Server()
		k := dialKernel(t, srv, startKernel(t, srv))
		k.run("x = 0")
		sides = append(sides, &side{name: tr, k: k})
	}
	for range 100 {
		for _, s := range sides {
			t0 := time.Now()
			if r := s.k.execute("x = 1; x + 1", 30*time.Second); r.Status != "ok" || r.Result != "2" {
				t.Fatalf("%s: %+v", s.name, r)
			}
			s.cells = append(s.cells, time.Since(t0))
		}
	}
	for range 3 {
		for _, s := range sides {
			t0 := time.Now()
			if out := s.k.run("import sys; sys.stdout.write('x' * (10 << 20))"); len(out) != 10<<20 {
				t.Fatalf("%s: 10 MiB of stdout arrived as %d bytes", s.name, len(out))
			}
			s.stream = append(s.stream, time.Since(t0))
		}
	}
	for _, s := range sides {
		slices.Sort(s.cells)
		slices.Sort(s.stream)
		t.Logf("%s under runc: trivial cell p50 %s p99 %s; 10 MiB of stdout, median of 3: %s", s.name,
			s.cells[len(s.cells)/2].Round(10*time.Microsecond), s.cells[len(s.cells)*99/100].Round(10*time.Microsecond),
			s.stream[1].Round(time.Millisecond))
	}
}
