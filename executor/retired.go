package executor

// The executor remembers, for a while, the ids of sessions it closed without being
// asked to (idle culling), so that a later call on the same id is told its variables
// are gone instead of silently getting a fresh kernel.

const maxRetired = 10000

// retireLocked is called with e.mu held.
func (e *Executor) retireLocked(id, why string) {
	if e.retired == nil {
		e.retired = make(map[string]string)
	}
	if len(e.retired) >= maxRetired {
		for k := range e.retired { // forget an arbitrary one
			delete(e.retired, k)
			break
		}
	}
	e.retired[id] = why
}

// takeRetired is called with e.mu held (from session creation).
func (e *Executor) takeRetired(id string) (string, bool) {
	why, ok := e.retired[id]
	if ok {
		delete(e.retired, id)
	}
	return why, ok
}
