package keep

import (
	"errors"
	"slices"
	"testing"
)

// TestKept: the zero Kept holds none; Take returns what Set stored once, Peek
// does not take it.
func TestKept(t *testing.T) {
	t.Parallel()
	var k Kept[[]string]
	if r, err := k.Take(); r != nil || err != nil {
		t.Fatalf("zero Kept: %v, %v", r, err)
	}
	k.Set([]string{"a", "b"}, nil)
	if r := k.Peek(); !slices.Equal(r, []string{"a", "b"}) {
		t.Fatalf("Peek %v", r)
	}
	if r, err := k.Take(); !slices.Equal(r, []string{"a", "b"}) || err != nil {
		t.Fatalf("Take %v, %v", r, err)
	}
	if r, err := k.Take(); r != nil || err != nil || k.Peek() != nil {
		t.Fatalf("second Take %v, %v", r, err)
	}
	bad := errors.New("corrupt")
	k.Set(nil, bad)
	if _, err := k.Take(); !errors.Is(err, bad) {
		t.Fatalf("Take after a bad file: %v", err)
	}
	if _, err := k.Take(); err != nil {
		t.Fatalf("the error taken twice: %v", err)
	}
}
