package executor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// BenchmarkTrivialCell measures one round-trip of a trivial cell through the executor
// on the local backend (see `kernelbox bench` for the comparison with direct ZMQ).
func BenchmarkTrivialCell(b *testing.B) {
	e := newEnv(b, nil)
	ctx := context.Background()
	e.run(b, "bench", "x = 0")
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r, err := e.Execute(ctx, api.Request{SessionID: "bench", Code: fmt.Sprintf("x = %d; x + 1", i)})
		if err != nil || r.Status != api.StatusOK {
			b.Fatal(err, r)
		}
	}
}

// BenchmarkCallAfterIdle is the trivial cell after the kernel sat unused for 300 ms,
// as an agent's calls usually do: it includes the kernel_info check that a kernel
// idle for over 200 ms still answers (compare with BenchmarkTrivialCell).
func BenchmarkCallAfterIdle(b *testing.B) {
	e := newEnv(b, nil)
	ctx := context.Background()
	e.run(b, "bench", "x = 0")
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		time.Sleep(300 * time.Millisecond)
		b.StartTimer()
		r, err := e.Execute(ctx, api.Request{SessionID: "bench", Code: fmt.Sprintf("x = %d; x + 1", i)})
		if err != nil || r.Status != api.StatusOK {
			b.Fatal(err, r)
		}
	}
}

// benchOutput measures a cell that prints size bytes of stdout.
func benchOutput(b *testing.B, code string, size int) {
	e := newEnv(b, func(o *executor.Options) { o.MaxStreamBytes = 16 << 20 })
	ctx := context.Background()
	e.run(b, "bench", code)
	b.SetBytes(int64(size))
	for b.Loop() {
		r, err := e.Execute(ctx, api.Request{SessionID: "bench", Code: code})
		if err != nil || r.Status != api.StatusOK || len(r.Stdout) != size {
			b.Fatal(err, r.Status, len(r.Stdout))
		}
	}
}

// BenchmarkStream10MiB is one cell printing 10 MiB in one write (kernelbox bench's
// stream row).
func BenchmarkStream10MiB(b *testing.B) {
	benchOutput(b, fmt.Sprintf("import sys; sys.stdout.write('x' * %d); sys.stdout.flush()", 10<<20), 10<<20)
}

// BenchmarkPrintLines is a cell printing 8 MB as 200,000 lines (ipykernel batches
// them into fewer messages).
func BenchmarkPrintLines(b *testing.B) {
	benchOutput(b, "for i in range(200000): print(f'{i:08d}', 'x' * 31)", 200000*41)
}

// BenchmarkPrintFlushed is a cell printing 4 MB as 10,000 flushed lines (one stream
// message each, as progress output does; kernelbox bench's lines row).
func BenchmarkPrintFlushed(b *testing.B) {
	benchOutput(b, "import sys\nfor i in range(10000):\n    sys.stdout.write('x' * 399 + '\\n'); sys.stdout.flush()", 10000*400)
}
