package kernelfs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func mbps(n int, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// transfer is one direction and route of a throughput measurement.
type transfer struct {
	name string
	// move moves size bytes once and returns how long the move itself took,
	// checking what arrived.
	move func(t testing.TB, r *rig, size int) time.Duration
}

var transfers = []transfer{
	{"push-kernel", func(t testing.TB, r *rig, size int) time.Duration { return pushOnce(t, r, size, false) }},
	{"push-contents", func(t testing.TB, r *rig, size int) time.Duration { return pushOnce(t, r, size, true) }},
	{"pull-kernel", pullOnce},
}

// pushOnce pushes a fresh random input through the kernel or the Contents API.
func pushOnce(t testing.TB, r *rig, size int, contents bool) time.Duration {
	t.Helper()
	data := make([]byte, size)
	_, _ = rand.Read(data)
	require.NoError(t, os.WriteFile(filepath.Join(r.host, "inputs", "big.bin"), data, 0o644))
	// Forget the previous round's file, so that the push does not first compare
	// checksums with it: only the move is measured.
	delete(r.s.pushed, "inputs/big.bin")
	r.s.o.Uploader = nil
	if contents {
		r.s.o.Uploader = r.files
	}
	start := time.Now()
	require.NoError(t, r.s.PushInputs(context.Background(), r.conn, r.host, []string{"big.bin"}))
	d := time.Since(start)
	if contents {
		require.Equal(t, contentsUsable, r.s.contents, "the Contents API route was taken")
	}
	require.Equal(t, sha256hex(data)+"\n", r.run(t, "import hashlib\nprint(hashlib.sha256(open('inputs/big.bin','rb').read()).hexdigest())"))
	return d
}

var pulls int

// pullOnce has the kernel write a fresh random output and pulls it.
func pullOnce(t testing.TB, r *rig, size int) time.Duration {
	t.Helper()
	pulls++
	name := fmt.Sprintf("out%d.bin", pulls)
	sum := r.run(t, fmt.Sprintf("import os, hashlib\nd = os.urandom(%d)\nopen('outputs/%s','wb').write(d)\nprint(hashlib.sha256(d).hexdigest())", size, name))
	start := time.Now()
	require.NoError(t, r.s.PullOutputs(context.Background(), r.conn, r.host, nil))
	d := time.Since(start)
	b, err := os.ReadFile(filepath.Join(r.host, "outputs", name))
	require.NoError(t, err)
	require.Equal(t, sum, sha256hex(b)+"\n")
	return d
}

// TestTransferThroughput moves an 8 MiB file each way, through the kernel and (for
// inputs) through the Contents API, checks the checksums, and holds each move to a
// generous floor of 1 MB/s: loopback measures 25-50 MB/s (see BenchmarkTransfer),
// so only a pathological slowdown (a per-chunk stall, quadratic reassembly) fails.
func TestTransferThroughput(t *testing.T) {
	const size, floor = 8 << 20, 1.0
	r := newRig(t, nil)
	for _, tr := range transfers {
		d := tr.move(t, r, size)
		t.Logf("%s: %d MiB in %v (%.1f MB/s)", tr.name, size>>20, d, mbps(size, d))
		require.GreaterOrEqual(t, mbps(size, d), floor, "%s: %d MiB took %v", tr.name, size>>20, d)
	}
}

// BenchmarkTransfer measures moving a 50 MB file each way, through the kernel and
// (for inputs) through the Contents API; the figures decide the remote backend's
// default transfer route. Run it with
//
//	go test -run '^$' -bench Transfer -benchtime 5x ./kernelfs
func BenchmarkTransfer(b *testing.B) {
	const size = 50 << 20
	r := newRig(b, nil)
	for _, tr := range transfers {
		b.Run(tr.name, func(b *testing.B) {
			// Each round also writes and checks its file: only the move is timed,
			// and the median round is reported (the machine may be shared).
			d := make([]time.Duration, b.N)
			for i := range b.N {
				d[i] = tr.move(b, r, size)
			}
			slices.Sort(d)
			b.ReportMetric(mbps(size, d[len(d)/2]), "MB/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
