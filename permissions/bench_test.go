package permissions

import (
	"context"
	"testing"
)

// BenchmarkCheck measures one Engine.Check with the default policy: a call that
// names no file (the common case), and one that stages one input.
func BenchmarkCheck(b *testing.B) {
	f := newFixture(b)
	tests := []struct {
		name string
		args map[string]any
	}{
		{"no target", nil},
		{"one input", map[string]any{"inputs": "a.csv"}},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			e := &Engine{Policy: DefaultPolicy(), Vars: f.vars()}
			caps := ExecuteCapabilities()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Check(ctx, caps, tt.args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
