// Package audit writes kernelbox's audit log: one JSON line per state-changing
// request and per refusal, with who asked (a token's id and name, never its
// secret), from where, what, and how it ended, to a file that rotates at a size
// bound. Start reading at [Log.Write]; the format is [Record] (and
// docs/security.md, "The audit log").
package audit

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Record is one line of the log.
type Record struct {
	Time time.Time `json:"time"`
	// TokenID and TokenName say who: "admin" for the server's token, a scoped
	// token's id and name, "" for a request with no valid token.
	TokenID   string `json:"token_id,omitempty"`
	TokenName string `json:"token_name,omitempty"`
	Remote    string `json:"remote,omitempty"`
	// Interface is "http", "mcp" or "jupyter".
	Interface string `json:"interface"`
	Method    string `json:"method,omitempty"`
	// Route is the route table's pattern ("POST /v1/sessions/{id}/execute"),
	// or the path for a request no route matched; for MCP, the tool.
	Route   string `json:"route"`
	Session string `json:"session,omitempty"`
	Call    string `json:"call,omitempty"`
	// Outcome is "ok", "refused" (by the guard: token, scope, host, rate) or
	// "error" (the handler failed it).
	Outcome string `json:"outcome"`
	Status  int    `json:"status,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Options configures a Log. The zero value of each field is its default.
type Options struct {
	// MaxBytes is the size at which the file is rotated. Defaults to 16 MiB.
	MaxBytes int64
	// Keep is how many rotated files are kept (path.1 the newest). Defaults
	// to 3.
	Keep int
	// Logger is told when a line cannot be written. Defaults to discarding.
	Logger *slog.Logger
}

// Log is an open audit log, safe for concurrent use. A nil *Log writes
// nothing.
type Log struct {
	o    Options
	path string

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Open opens (appends to, 0600) the log at path, making its directory 0700.
func Open(path string, o Options) (*Log, error) {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 16 << 20
	}
	if o.Keep <= 0 {
		o.Keep = 3
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	l := &Log{o: o, path: path}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("audit log: %w", err)
	}
	l.f, l.size = f, fi.Size()
	return nil
}

// Path is the log's file.
func (l *Log) Path() string {
	if l == nil {
		return ""
	}
	return l.path
}

// maxReason bounds a record's reason, so that a line stays small whatever a
// client sent.
const maxReason = 300

// Write appends r (its Time set when zero), rotating the file first when it
// would pass MaxBytes. A failure is logged, never returned: auditing must not
// fail the request it records.
func (l *Log) Write(r Record) {
	if l == nil {
		return
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Time = r.Time.UTC()
	if len(r.Reason) > maxReason {
		r.Reason = r.Reason[:maxReason] + "..."
	}
	if len(r.Route) > maxReason {
		r.Route = r.Route[:maxReason] + "..."
	}
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	if l.size+int64(len(b)) > l.o.MaxBytes && l.size > 0 {
		if err := l.rotate(); err != nil {
			l.o.Logger.Warn("audit log: rotate", "err", err)
		}
	}
	n, err := l.f.Write(b)
	l.size += int64(n)
	if err != nil {
		l.o.Logger.Warn("audit log: write", "err", err)
	}
}

// rotate moves path to path.1, path.1 to path.2 ..., dropping the oldest.
func (l *Log) rotate() error {
	_ = l.f.Close()
	l.f = nil
	for i := l.o.Keep; i >= 1; i-- {
		from := l.path
		if i > 1 {
			from = l.path + "." + strconv.Itoa(i-1)
		}
		if err := os.Rename(from, l.path+"."+strconv.Itoa(i)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return l.open()
}

// Close closes the file.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
