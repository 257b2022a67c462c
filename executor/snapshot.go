package executor

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/jupyter"
)

// snapshotPy is the kernel's half of hibernate, resume and fork: it saves the user
// namespace name by name with dill and loads it back, always inside the session's
// own kernel (unpickling runs code: never in kernelbox's process or on the host).
//
//go:embed snapshot.py
var snapshotPy string

// SnapshotFile is the name of a session's namespace snapshot in its directory.
// The kernel writes it to a temporary name beside it and renames it, so the name
// never holds a half-written file.
const SnapshotFile = ".kernelbox-snapshot"

// SessionDirer is implemented by placements whose kernels see the session's host
// directory at a path they can name (local: the host path itself; docker: the
// container's /workspace), so that a snapshot the kernel writes there stays with the
// session after the kernel stops. Hibernate and fork need it: a session on a
// placement without it (a remote gateway, a swarm task, whose kernels keep their
// files in their own container) cannot hibernate. hostDir is the session
// directory's current host path.
type SessionDirer interface {
	KernelDir(hostDir string) string
}

// snapReport is what snapshot.py prints, for a save or a load.
type snapReport struct {
	OK      bool              `json:"ok"`
	Error   string            `json:"error"`
	NoSpace bool              `json:"nospace"`
	TooBig  bool              `json:"too_big"`
	Bytes   int64             `json:"bytes"`
	Limit   int64             `json:"limit"`
	Name    string            `json:"name"`
	Largest [][2]any          `json:"largest"`
	Names   []string          `json:"names"`
	Modules map[string]string `json:"modules"`
	Skipped map[string]string `json:"skipped"`

	Lost        string            `json:"lost"`
	Restored    []string          `json:"restored"`
	NotRestored map[string]string `json:"not_restored"`
	// ByDesign are the names a snapshot leaves out on purpose (IPython's
	// history caches), with why; Meta is what the save was given to keep (a
	// checkpoint's call), as read back from the very file that was loaded.
	ByDesign map[string]string `json:"by_design"`
	Meta     *snapMeta         `json:"meta"`
}

// snapMeta is what kernelbox writes into a snapshot's index beside the namespace
// and reads back from the file a load used: so that a restore says which call the
// state it loaded is from, whichever file was there (issue 46: a record that lags
// behind the file, or the reverse, must not make it say another).
type snapMeta struct {
	AfterCall int `json:"after_call,omitempty"`
}

// pyMeta is m as a Python literal for _kb_save (JSON is one for these fields).
func pyMeta(m snapMeta) string {
	b, _ := json.Marshal(m)
	return "__import__('json').loads(" + pyStr(string(b)) + ")"
}

// snapMarker starts the report line; maxReport bounds what is kept of the
// kernel's output while the snapshot code runs.
const (
	snapMarker = "\x1ekernelbox-snapshot "
	maxReport  = 4 << 20
)

// snapshotCode is the cell that runs call (a function of snapshot.py) in a private
// globals dict: nothing of kernelbox's lands in the user's namespace.
func snapshotCode(call string) string {
	src, _ := json.Marshal(snapshotPy + "\nfrom IPython import get_ipython\n" + call + "\n")
	return "exec(" + string(src) + ", {'__name__': '_kernelbox_snapshot'})"
}

// pyStr quotes s as a Python string literal.
func pyStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// errSnapInterrupted: the snapshot code ended with a KeyboardInterrupt (a stop's
// or a user's interrupt).
var errSnapInterrupted = errors.New("the snapshot code was interrupted (KeyboardInterrupt)")

// runSnapshot runs one snapshot.py call silently in the session's kernel and returns its
// report. An error is a kernel that raised (MemoryError, an interrupt), died, or
// printed no report.
func (s *session) runSnapshot(ctx context.Context, call string) (*snapReport, error) {
	s.afterInterrupts()
	ex, err := s.k.conn.Execute(ctx, jupyter.ExecuteRequest{Code: snapshotCode(call), Silent: true})
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	if strings.HasPrefix(call, "_kb_load(") {
		// A load may be interrupted (a stop, the user): it shows that its code
		// runs by a first line of output (a silent request has no execute_input).
		s.running.Store(ex)
		defer s.running.Store(nil)
	}
	var out strings.Builder
	for {
		m, err := ex.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		var sc jupyter.StreamContent
		if m.Type() == "stream" && m.DecodeContent(&sc) == nil && out.Len() < maxReport {
			out.WriteString(sc.Text)
		}
	}
	reply, err := ex.Reply()
	if err != nil {
		return nil, err
	}
	if reply.Status != "ok" && reply.Ename == "KeyboardInterrupt" {
		return nil, errSnapInterrupted
	}
	if reply.Status != "ok" {
		return nil, fmt.Errorf("the snapshot code failed in the kernel: %s: %s", reply.Ename, clip(reply.Evalue, 300))
	}
	text := out.String()
	i := strings.LastIndex(text, snapMarker)
	if i < 0 {
		return nil, errors.New("the snapshot code printed no report (its output was over 4 MiB, or something closed its stdout)")
	}
	line, _, _ := strings.Cut(text[i+len(snapMarker):], "\n")
	var r snapReport
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return nil, fmt.Errorf("the snapshot code's report: %w", err)
	}
	return &r, nil
}

// kernelSnapshotPath is where the session's kernel sees its snapshot file, or an
// error wrapping api.ErrCannotHibernate when the session cannot keep one.
func (s *session) kernelSnapshotPath() (string, error) {
	if s.k == nil || s.ws == nil {
		return "", fmt.Errorf("%w: session %q has no kernel (it never ran a call, or its kernel died)", api.ErrCannotHibernate, s.id)
	}
	if !s.k.python() {
		return "", fmt.Errorf("%w: session %q runs a %s kernel; only Python sessions hibernate or fork (an R session is closed when idle, as before)", api.ErrCannotHibernate, s.id, s.k.languageName())
	}
	d, ok := s.k.placement.(SessionDirer)
	if !ok {
		return "", fmt.Errorf("%w: the %s backend keeps a kernel's files in its own container, away from the session directory, so its sessions cannot hibernate", api.ErrCannotHibernate, s.e.Backend())
	}
	return path.Join(d.KernelDir(s.ws.Dir()), SnapshotFile), nil
}
