package executor_test

import (
	"context"
	"fmt"
	"testing"

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
		r, err := e.Execute(ctx, executor.Request{SessionID: "bench", Code: fmt.Sprintf("x = %d; x + 1", i)})
		if err != nil || r.Status != executor.StatusOK {
			b.Fatal(err, r)
		}
	}
}

// BenchmarkStream10MiB is one cell printing 10 MiB (kernelbox bench's stream row).
func BenchmarkStream10MiB(b *testing.B) {
	e := newEnv(b, func(o *executor.Options) { o.MaxStreamBytes = 16 << 20 })
	ctx := context.Background()
	const size = 10 << 20
	code := fmt.Sprintf("import sys; sys.stdout.write('x' * %d); sys.stdout.flush()", size)
	e.run(b, "bench", code)
	b.SetBytes(size)
	for b.Loop() {
		r, err := e.Execute(ctx, executor.Request{SessionID: "bench", Code: code})
		if err != nil || r.Status != executor.StatusOK || len(r.Stdout) != size {
			b.Fatal(err, r.Status, len(r.Stdout))
		}
	}
}

// BenchmarkPrintLines is a cell printing 8 MB as 200,000 lines (many stream messages).
func BenchmarkPrintLines(b *testing.B) {
	e := newEnv(b, func(o *executor.Options) { o.MaxStreamBytes = 16 << 20 })
	ctx := context.Background()
	code := "for i in range(200000): print(f'{i:08d}', 'x' * 31)"
	e.run(b, "bench", code)
	b.SetBytes(200000 * 41)
	for b.Loop() {
		r, err := e.Execute(ctx, executor.Request{SessionID: "bench", Code: code})
		if err != nil || r.Status != executor.StatusOK || len(r.Stdout) != 200000*41 {
			b.Fatal(err, r.Status, len(r.Stdout))
		}
	}
}

// BenchmarkPrintFlushed is a cell printing 4 MB as 10,000 flushed lines (one stream
// message each, as progress output does).
func BenchmarkPrintFlushed(b *testing.B) {
	e := newEnv(b, func(o *executor.Options) { o.MaxStreamBytes = 16 << 20 })
	ctx := context.Background()
	code := "import sys\nfor i in range(10000):\n    sys.stdout.write('x' * 399 + '\\n'); sys.stdout.flush()"
	e.run(b, "bench", code)
	b.SetBytes(10000 * 400)
	for b.Loop() {
		r, err := e.Execute(ctx, executor.Request{SessionID: "bench", Code: code})
		if err != nil || r.Status != executor.StatusOK || len(r.Stdout) != 10000*400 {
			b.Fatal(err, r.Status, len(r.Stdout))
		}
	}
}
