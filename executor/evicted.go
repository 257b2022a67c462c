package executor

import "github.com/kernelbox/kernelbox/workspace"

// noteEvicted makes the next result report state_lost, saying the files are
// gone too, when the workspace deleted this session's directory after its
// previous incarnation closed (it keeps only so many closed sessions' files,
// workspace.Options.MaxKeptSessions). It replaces a note that said the files
// remain.
func (s *session) noteEvicted(ws *workspace.Session) {
	if ws.Evicted() {
		s.lost, s.lostWhy = true, "the session was closed (for being idle, or by a restart of kernelbox) and its directory was deleted since: "+
			"the workspace keeps the files of a bounded number of closed sessions (--max-kept-sessions) and this one was closed longest ago; "+
			"its variables and its files are gone (its artifacts stay)"
	}
}
