package executor

// WarmReady returns how many warm kernels are started and waiting for a session.
func (e *Executor) WarmReady() int {
	if e.pool == nil {
		return 0
	}
	return e.pool.count()
}
