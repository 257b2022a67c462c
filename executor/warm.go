package executor

// WarmReady returns how many warm kernels are started and waiting for a session,
// all templates together.
func (e *Executor) WarmReady() int {
	n := 0
	for _, p := range e.pools {
		n += p.count()
	}
	return n
}

// WarmReadyOf returns how many warm kernels of one template are waiting.
func (e *Executor) WarmReadyOf(template string) int {
	if p := e.pools[template]; p != nil {
		return p.count()
	}
	return 0
}
