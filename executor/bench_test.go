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
