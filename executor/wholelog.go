package executor

// The calls journal (issue 46): what a restarted kernelbox must know of the calls
// answered since the state file was last written.
//   - A session that checkpoints after each call has its result delivered before
//     the checkpoint is written, so a kernelbox killed in between must still know
//     that the call was acknowledged: else it would restore the checkpoint before
//     it as if it were current ("whole": item 4).
//   - A kept kernel that died between calls and was restarted by its server while
//     kernelbox was down looks alive at adoption; its execution count, lower than
//     the last reply's, gives it away ("count": the chaos test's finding).
// Before each result is delivered, one line {"id","whole","count"} is appended to
// WORKSPACE/state/whole.log (no fsync: it outlives a killed process, which is
// what it is for; ~50 bytes and a write(2) per call). The state file carries each
// session's values too (keptSession.Whole, ExecutionCount); a session's last line
// in the journal is merged into its record at the next start, and the journal
// emptied once the merged state is on disk; it is compacted the same way when it
// passes maxWholeLog.

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
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
	Whole int    `json:"whole,omitempty"`
	Count int    `json:"count,omitempty"`
}

// noteWhole runs on the worker after a call's result is made and before it is
// delivered: it journals the kernel's execution count and, when the session
// checkpoints and the call left the namespace whole (ok, or an error its code
// raised; not a death), records the call as the last whole one.
func (s *session) noteWhole(r *api.Result) {
	if r == nil {
		return
	}
	wholeNow := s.tmpl.Checkpoint == CheckpointAfterCall && s.ckpt.disabled == "" && !s.ckpt.lostInCall
	s.mu.Lock()
	if wholeNow {
		s.whole = s.state.Calls // counted for this call already (touch)
	}
	whole, count := s.whole, s.state.ExecutionCount
	s.mu.Unlock()
	if wholeNow {
		s.ckpt.lastWhole = whole
	}
	s.e.appendWhole(wholeLine{ID: s.id, Whole: whole, Count: count})
}

// noteReset journals that the session's kernel restarted on request: its counts
// begin again, which a later adoption must not take for a death.
func (s *session) noteReset() {
	s.mu.Lock()
	s.state.ExecutionCount = 0
	whole := s.whole
	s.mu.Unlock()
	s.e.appendWhole(wholeLine{ID: s.id, Whole: whole})
}

// appendWhole appends one line to the journal, folding it into the state file
// when it has grown past maxWholeLog.
func (e *Executor) appendWhole(l wholeLine) {
	k := e.keep
	if k == nil {
		return
	}
	line, _ := json.Marshal(l)
	k.jmu.Lock()
	defer k.jmu.Unlock()
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
	if k.wholeBytes > maxWholeLog {
		// Everything the journal says is in the sessions' records now (each
		// session's values are set before its line is written; no line is
		// appended meanwhile, jmu is held).
		k.mu.Lock()
		if !k.frozen {
			e.writeStateLocked(e.liveRecords())
			if err := k.whole.Truncate(0); err == nil {
				k.wholeBytes = 0
			}
		}
		k.mu.Unlock()
	}
}

// readWhole returns each session's last line in the journal (a line cut short by
// a kill is skipped), or nil.
func readWhole(dir string) map[string]wholeLine {
	f, err := os.OpenFile(filepath.Join(dir, wholeLogName), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]wholeLine{}
	// Bounded: the journal is compacted past maxWholeLog, so more is damage.
	sc := bufio.NewScanner(io.LimitReader(f, 4*maxWholeLog))
	for sc.Scan() {
		var l wholeLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && api.ValidSessionID(l.ID) {
			out[l.ID] = l
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
