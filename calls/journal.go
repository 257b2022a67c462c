package calls

// The journal (Options.Journal, issue 34 item 1) lists the calls that have not
// ended, so that a server started again after its process ended (SIGKILL, a
// crash, a stop) answers GET /v1/calls/ID for each with an explicit lost status
// and the reason, never a not-found. It is rewritten whole (temporary file,
// rename, 0600) when a call is registered and when one ends: a registered call's
// id is in it before Start returns that id. Close freezes it with the calls still
// running, marked as stopped.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kernelbox/kernelbox/api"
)

// journalVersion is the journal's format version; another is refused.
const journalVersion = 1

// maxJournalBytes bounds the journal read back.
const maxJournalBytes = 64 << 20

// journalFile is the journal.
type journalFile struct {
	Version int            `json:"version"`
	Calls   []journalEntry `json:"calls"`
}

// journalEntry is one call that had not ended.
type journalEntry struct {
	ID      string    `json:"id"`
	Session string    `json:"session"`
	Code    string    `json:"code"` // clipped to api.MaxCallCodeBytes
	Created time.Time `json:"created"`
	// Stopped: the server was stopped (not killed) while the call ran.
	Stopped bool `json:"stopped,omitempty"`
}

// writeJournal writes the calls not yet ended to the journal; stopped marks
// them as ended by a stop of the server and freezes the journal. r.jmu is held.
func (r *Registry) writeJournalLocked(stopped bool) {
	if r.o.Journal == "" || r.jFrozen {
		return
	}
	r.jFrozen = stopped
	r.mu.Lock()
	f := journalFile{Version: journalVersion, Calls: []journalEntry{}}
	for _, c := range r.calls {
		c.mu.Lock()
		if c.state != api.CallDone && !c.lost {
			code := c.req.Code
			if len(code) > api.MaxCallCodeBytes {
				code = clipUTF8(code, api.MaxCallCodeBytes)
			}
			f.Calls = append(f.Calls, journalEntry{ID: c.id, Session: c.req.SessionID, Code: code,
				Created: c.created, Stopped: stopped})
		}
		c.mu.Unlock()
	}
	r.mu.Unlock()
	data, err := json.Marshal(f)
	if err == nil {
		err = writeAtomic(r.o.Journal, data)
	}
	if err != nil {
		r.o.Logger.Error("write the calls journal: calls cut short by a crash will be unknown to the next start", "file", r.o.Journal, "err", err)
	}
}

// journal rewrites the journal.
func (r *Registry) journal() {
	if r.o.Journal == "" {
		return
	}
	r.jmu.Lock()
	defer r.jmu.Unlock()
	r.writeJournalLocked(false)
}

// loadJournal reads the journal a previous process left and registers each call
// in it as ended and lost, then empties it. A journal that cannot be read is
// logged and set aside (.bad).
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
	r.journal()
}

// readJournal reads the journal at path; a missing one is empty.
func readJournal(path string) ([]journalEntry, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxJournalBytes {
		return nil, fmt.Errorf("calls journal %s is not a regular file of at most %d bytes", path, maxJournalBytes)
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, err
	}
	var jf journalFile
	if err := json.Unmarshal(data, &jf); err != nil {
		return nil, fmt.Errorf("calls journal %s is corrupt: %w", path, err)
	}
	if jf.Version != journalVersion {
		return nil, fmt.Errorf("calls journal %s has format %d, this kernelbox reads %d", path, jf.Version, journalVersion)
	}
	var out []journalEntry
	for _, e := range jf.Calls {
		if e.ID != "" && len(e.ID) <= 64 && api.ValidSessionID(e.Session) {
			out = append(out, e)
		}
	}
	return out, nil
}

// writeAtomic writes data to path through a temporary file renamed over it, mode
// 0600. It does not fsync: the journal guards against the process's end, not the
// machine's.
func writeAtomic(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	if err = f.Chmod(0o600); err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// StopJournal writes the journal's last list, the calls not yet ended marked as
// stopped by the server, and writes it no more: the next registry on the journal
// answers them as lost. A server's graceful stop calls it before it stops the
// runner, whose ending calls would otherwise leave the list as they end. Close
// does the same, for a server that did not.
func (r *Registry) StopJournal() {
	r.jmu.Lock()
	defer r.jmu.Unlock()
	r.writeJournalLocked(true)
}
