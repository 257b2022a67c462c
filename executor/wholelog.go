package executor

// The whole-call journal (issue 46 item 4): a session that checkpoints after each
// call has its result delivered before the checkpoint is written, so a kernelbox
// killed in between must still know, at its next start, that the call was
// acknowledged: else it would restore the checkpoint before it as if it were
// current. Before each such result is delivered, one line {"id","whole"} is
// appended to WORKSPACE/state/whole.log (no fsync: it outlives a killed process,
// which is what it is for; ~40 bytes and a write(2) per call). The state file
// carries each session's latest value too (keptSession.Whole); the journal is
// merged into it at the next start and emptied once the merged state is on disk,
// and compacted the same way when it passes maxWholeLog.

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/kernelbox/kernelbox/api"
)

// wholeLogName is the journal's name in the state directory.
const wholeLogName = "whole.log"

// maxWholeLog is the journal's size past which it is folded into the state file.
const maxWholeLog = 1 << 20

// wholeLine is one line of the journal.
type wholeLine struct {
	ID    string `json:"id"`
	Whole int    `json:"whole"`
}

// noteWhole runs on the worker after a call's result is made and before it is
// delivered: when the session checkpoints and the call left the namespace whole
// (ok, or an error its code raised; not a death), it records the call as the last
// whole one, in memory and in the journal.
func (s *session) noteWhole(r *Result) {
	if s.tmpl.Checkpoint != CheckpointAfterCall || r == nil || s.ckpt.disabled != "" || s.ckpt.lostInCall {
		return
	}
	s.mu.Lock()
	call := s.state.Calls // counted for this call already (touch)
	s.whole = call
	s.mu.Unlock()
	s.ckpt.lastWhole = call
	s.e.appendWhole(s.id, call)
}

// appendWhole appends one line to the journal, folding it into the state file
// when it has grown past maxWholeLog.
func (e *Executor) appendWhole(id string, call int) {
	k := e.keep
	if k == nil {
		return
	}
	line, _ := json.Marshal(wholeLine{ID: id, Whole: call})
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.whole == nil {
		f, err := os.OpenFile(filepath.Join(e.opts.StateDir, wholeLogName), os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			e.log.Error("the whole-call journal cannot be opened: a kill before the next checkpoint may be told as a loss of later calls' changes, never hidden", "err", err)
			return
		}
		k.whole = f
	}
	n, err := k.whole.Write(append(line, '\n'))
	if err != nil {
		e.log.Error("writing the whole-call journal", "err", err)
	}
	k.wholeBytes += int64(n)
	if k.wholeBytes > maxWholeLog && !k.frozen {
		// Everything the journal says is in the sessions' records now (each
		// session's whole is set before its line is written).
		e.writeStateLocked(e.liveRecords())
		if err := k.whole.Truncate(0); err == nil {
			k.wholeBytes = 0
		}
	}
}

// readWhole returns the journal's latest value per session (a line cut short by
// a kill is skipped), or nil.
func readWhole(dir string) map[string]int {
	f, err := os.OpenFile(filepath.Join(dir, wholeLogName), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l wholeLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && api.ValidSessionID(l.ID) && l.Whole > out[l.ID] {
			out[l.ID] = l.Whole
		}
	}
	return out
}

// emptyWhole empties the journal once the state that holds what it said is on
// disk (at the start).
func (e *Executor) emptyWhole() {
	err := os.Truncate(filepath.Join(e.opts.StateDir, wholeLogName), 0)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		e.log.Warn("emptying the whole-call journal", "err", err)
	}
}
