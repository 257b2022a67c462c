package calls

// The journal (Options.Journal, issue 34 item 1) lists the calls that have not
// ended, so that a server started again after its process ended (SIGKILL, a
// crash, a stop) answers GET /v1/calls/ID for each with an explicit lost status
// and the reason, never a not-found. It is a file of JSON lines, 0600: a version
// line, then "+" when a call is registered (before Start returns its id) and "-"
// when it ends, each one append of one line (a few microseconds; a whole-file
// rewrite per call cost 1.4 ms here). Past compactAfter lines it is rewritten
// with the calls still open (temporary file, rename). A line cut short by a
// SIGKILL mid-write is skipped when read. StopJournal rewrites it with the calls
// still running marked as stopped, and it is written no more.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/statefile"
)

// journalVersion is the journal's format version; another is refused.
const journalVersion = 1

// maxJournalBytes bounds the journal read back.
const maxJournalBytes = 64 << 20

// compactAfter is how many lines are appended before the journal is rewritten
// with only the calls still open.
const compactAfter = 4096

// journalEntry is one line of the journal.
type journalEntry struct {
	Version int       `json:"version,omitempty"` // the first line's only field
	Op      string    `json:"op,omitempty"`      // "+" registered, "-" ended
	ID      string    `json:"id,omitempty"`
	Session string    `json:"session,omitempty"`
	Code    string    `json:"code,omitempty"` // clipped to api.MaxCallCodeBytes
	Created time.Time `json:"created,omitzero"`
	// Stopped: the server was stopped (not killed) while the call ran.
	Stopped bool `json:"stopped,omitempty"`
}

// clipCode clips a call's code for the journal.
func clipCode(code string) string {
	if len(code) > api.MaxCallCodeBytes {
		return clipUTF8(code, api.MaxCallCodeBytes)
	}
	return code
}

// journalLine appends e to the journal, rewriting it first when it has grown.
func (r *Registry) journalLine(e journalEntry) {
	if r.o.Journal == "" {
		return
	}
	r.jmu.Lock()
	defer r.jmu.Unlock()
	if r.jFrozen {
		return
	}
	if r.jFile == nil || r.jOps >= compactAfter {
		r.rewriteJournalLocked(false)
		if e.Op == "+" {
			return // the rewrite has the call already
		}
	}
	if r.jFile == nil {
		return
	}
	b, _ := json.Marshal(e)
	if _, err := r.jFile.Write(append(b, '\n')); err != nil {
		r.o.Logger.Error("write the calls journal: calls cut short by a crash will be unknown to the next start", "file", r.o.Journal, "err", err)
	}
	r.jOps++
}

// rewriteJournalLocked rewrites the journal with the calls not yet ended (marked
// stopped, and then written no more, when stopped) and opens it for appending.
// r.jmu is held.
func (r *Registry) rewriteJournalLocked(stopped bool) {
	var buf bytes.Buffer
	b, _ := json.Marshal(journalEntry{Version: journalVersion})
	buf.Write(append(b, '\n'))
	r.mu.Lock()
	for _, c := range r.calls {
		c.mu.Lock()
		if c.state != api.CallDone && !c.lost {
			b, _ := json.Marshal(journalEntry{Op: "+", ID: c.id, Session: c.req.SessionID, Code: clipCode(c.req.Code),
				Created: c.created, Stopped: stopped})
			buf.Write(append(b, '\n'))
		}
		c.mu.Unlock()
	}
	r.mu.Unlock()
	if r.jFile != nil {
		_ = r.jFile.Close()
		r.jFile = nil
	}
	r.jOps, r.jFrozen = 0, stopped
	err := statefile.Write(r.o.Journal, buf.Bytes(), false)
	if err == nil && !stopped {
		r.jFile, err = os.OpenFile(r.o.Journal, os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0)
	}
	if err != nil {
		r.o.Logger.Error("write the calls journal: calls cut short by a crash will be unknown to the next start", "file", r.o.Journal, "err", err)
	}
}

// StopJournal writes the journal's last list, the calls not yet ended marked as
// stopped by the server, and writes it no more: the next registry on the journal
// answers them as lost. A server's graceful stop calls it before it stops the
// runner, whose ending calls would otherwise leave the list as they end. Close
// does the same, for a server that did not.
func (r *Registry) StopJournal() {
	if r.o.Journal == "" {
		return
	}
	r.jmu.Lock()
	defer r.jmu.Unlock()
	if !r.jFrozen {
		r.rewriteJournalLocked(true)
	}
}

// loadJournal reads the journal a previous process left and registers each call
// still open in it as ended and lost, then starts the journal afresh. A journal
// that cannot be read is logged and set aside (.bad).
func (r *Registry) loadJournal() {
	entries, err := readJournal(r.o.Journal)
	if err != nil {
		r.o.Logger.Error("the calls journal cannot be read: calls cut short by the last stop are unknown", "err", err)
		_ = os.Rename(r.o.Journal, r.o.Journal+".bad")
	}
	now := time.Now()
	for _, e := range entries {
		why := "kernelbox's process ended (it was killed or crashed) while the call was queued or running: its answer and output are gone"
		if e.Stopped {
			why = "kernelbox was stopped while the call was queued or running: its answer and output are gone"
		}
		why += "; if its session was taken back after the restart, code of the call still running there was interrupted, and the session's variables are as the call left them"
		c := &Call{
			id: e.ID, req: api.Request{SessionID: e.Session, Code: e.Code}, created: e.Created,
			cancel: func() {}, done: make(chan struct{}), state: api.CallDone, finished: now, lost: true,
			err: fmt.Errorf("call %s: %w: %s", e.ID, api.ErrCallLost, why),
		}
		c.log = newEventLog(r.o.MaxLogBytes, r.grow)
		c.log.close()
		close(c.done)
		r.calls[c.id] = c
		r.finished = append(r.finished, c)
	}
	if len(entries) > 0 {
		r.o.Logger.Warn("calls lost with the previous process", "calls", len(entries))
	}
	r.jmu.Lock()
	r.rewriteJournalLocked(false)
	r.jmu.Unlock()
}

// readJournal reads the journal at path and returns the calls it leaves open, in
// the order they were registered; a missing journal has none.
func readJournal(path string) ([]journalEntry, error) {
	data, err := statefile.Read(path, maxJournalBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var (
		open  = map[string]int{} // id -> index in list
		list  []journalEntry
		first = true
	)
	for sc.Scan() {
		var e journalEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			if first {
				return nil, fmt.Errorf("calls journal %s is corrupt", path)
			}
			continue // a line cut short by the process's end
		}
		if first {
			if e.Version != journalVersion {
				return nil, fmt.Errorf("calls journal %s has format %d, this kernelbox reads %d", path, e.Version, journalVersion)
			}
			first = false
			continue
		}
		switch {
		case e.Op == "+" && e.ID != "" && len(e.ID) <= 64 && api.ValidSessionID(e.Session):
			if _, ok := open[e.ID]; !ok {
				open[e.ID] = len(list)
				list = append(list, e)
			}
		case e.Op == "-":
			if i, ok := open[e.ID]; ok {
				list[i].ID = ""
				delete(open, e.ID)
			}
		}
	}
	if first {
		return nil, fmt.Errorf("calls journal %s is empty or corrupt", path)
	}
	out := list[:0]
	for _, e := range list {
		if e.ID != "" {
			out = append(out, e)
		}
	}
	return out, nil
}
