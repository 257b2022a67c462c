package executor

import "github.com/kernelbox/kernelbox/api"

// The executor remembers, for a while, the ids of sessions it closed without being
// asked to (idle culling, a restart that could not take them back), so that a later
// call on the same id is told its variables are gone instead of silently getting a
// fresh kernel, and gets its template again (its network allowlist, secrets and
// limits) rather than the default one when it names none.

const maxRetired = 10000

// retiredSession is what the executor remembers of a retired session.
type retiredSession struct {
	why      string // why its state is gone
	template string // its template's name ("": the default, or one no longer configured)
}

// retireLocked is called with e.mu held.
func (e *Executor) retireLocked(id, template, why string) {
	if e.retired == nil {
		e.retired = make(map[string]retiredSession)
	}
	if len(e.retired) >= maxRetired {
		for k := range e.retired { // forget an arbitrary one
			delete(e.retired, k)
			break
		}
	}
	e.retired[id] = retiredSession{why: why, template: template}
}

// takeRetired is called with e.mu held (from session creation).
func (e *Executor) takeRetired(id string) (string, bool) {
	r, ok := e.retired[id]
	if ok {
		delete(e.retired, id)
	}
	return r.why, ok
}

// retiredTemplate is the template of retired session id, "" when it is not
// retired (or had the default template).
func (e *Executor) retiredTemplate(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.retired[id].template
}

// TemplateFor names the template a session created now as id would get when its
// creation names template: template itself when not empty; else the template of
// session id if the executor retired it (its state was lost: it comes back with
// its own template, not the default one); else the default template. A front end
// checks a token's template scope against it (a retired session's next call
// naming no template must not pass as a default one).
func (e *Executor) TemplateFor(id, template string) string {
	if template != "" {
		return template
	}
	if t := e.retiredTemplate(id); t != "" {
		return t
	}
	return api.DefaultTemplateName
}
