package keep

import "sync"

// Kept holds what a backend's New read from its state file for Reattach: the
// records, or why there are none (the file could not be used). Reattach takes
// them once. The zero value holds none. It is safe for concurrent use.
type Kept[T any] struct {
	mu      sync.Mutex
	records T
	err     error
}

// Set stores what New read: the records, or why there are none.
func (k *Kept[T]) Set(records T, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.records, k.err = records, err
}

// Peek returns the records not taken yet (the zero T once Reattach has taken
// them): what the reap spares, or which directories are the backend's.
func (k *Kept[T]) Peek() T {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.records
}

// Take returns the records and why there are none, and leaves nothing: a second
// Take returns the zero T and no error.
func (k *Kept[T]) Take() (T, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var zero T
	records, err := k.records, k.err
	k.records, k.err = zero, nil
	return records, err
}
