package egress

import (
	"bytes"
	"errors"
	"testing"
)

// writes records each Write it gets.
type writes struct {
	got [][]byte
	err error
}

func (w *writes) Write(b []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.got = append(w.got, bytes.Clone(b))
	return len(b), nil
}

// A batchWriter passes writes through while no batch is open, gathers a
// batch's writes into one (bounded by maxBatch), and reports a failed write
// of a batch at its end and on every write after.
func TestBatchWriter(t *testing.T) {
	w := &writes{}
	b := &batchWriter{w: w}
	b.Write([]byte("alone"))
	if len(w.got) != 1 {
		t.Fatalf("a write without a batch waits: %q", w.got)
	}
	b.begin()
	for range 3 {
		b.Write([]byte("record"))
	}
	if len(w.got) != 1 {
		t.Fatalf("a batch's writes went out before its end: %q", w.got)
	}
	if err := b.end(); err != nil || len(w.got) != 2 || string(w.got[1]) != "recordrecordrecord" {
		t.Fatalf("end: %v %q", err, w.got)
	}
	b.begin()
	big := make([]byte, maxBatch/2+1)
	b.Write(big)
	b.Write(big)
	if len(w.got) != 3 || len(w.got[2]) != len(big) {
		t.Fatalf("a batch past maxBatch writes what gathered first: %d writes", len(w.got))
	}
	b.end()
	if len(w.got) != 4 {
		t.Fatalf("end wrote the rest: %d writes", len(w.got))
	}
	if b.buf != nil {
		t.Fatal("the batch's buffer is held after end")
	}
	w.err = errors.New("peer gone")
	b.begin()
	if _, err := b.Write([]byte("x")); err != nil {
		t.Fatalf("a gathered write fails only when written: %v", err)
	}
	if err := b.end(); err == nil {
		t.Fatal("end did not report the failed write")
	}
	if _, err := b.Write([]byte("y")); err == nil {
		t.Fatal("a write after a failed batch succeeded")
	}
}
