package sessionproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/internal/statefile"
)

// MaxBudgets bounds the sessions whose egress budgets a backend keeps; past it,
// the one touched longest ago is forgotten (its session, should it come back,
// starts again from nothing: far more sessions than a server holds at once).
const MaxBudgets = 4096

// budgetsVersion is the budgets file's format version; another is ignored.
const budgetsVersion = 1

// maxBudgetsBytes bounds the budgets file read back.
const maxBudgetsBytes = 1 << 20

// saveEvery bounds how often Take writes the budgets file.
const saveEvery = time.Second

// Budgets keeps, by session id, the byte budget (egress.Budget) every proxy a
// session gets over its life spends from: a session whose kernel or container
// is replaced (a crash, a reset, a hibernation and its resume), or that takes a
// warm kernel, carries on with what it has spent, so that a kernel cannot win a
// fresh max_bytes by getting itself replaced (issue 47 item 4). With a path the
// budgets are also kept in a private file (0600, written whole) and read back
// by the next server made with the same path, for the sessions it adopts or
// starts again. It is safe for concurrent use; a nil *Budgets gives every
// proxy a budget of its own.
type Budgets struct {
	path  string
	log   *slog.Logger
	mu    sync.Mutex
	m     map[string]*budgetEntry
	saved time.Time
}

type budgetEntry struct {
	b       *egress.Budget
	touched time.Time
}

// budgetsFile is the budgets file's content.
type budgetsFile struct {
	Version int              `json:"version"`
	Used    map[string]int64 `json:"used"`
}

// NewBudgets returns the budgets kept in path ("" keeps them in memory only),
// reading what an earlier server kept there; a missing or unreadable file
// starts empty (an unreadable one is logged).
func NewBudgets(path string, log *slog.Logger) *Budgets {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Budgets{path: path, log: log, m: map[string]*budgetEntry{}}
	if path == "" {
		return b
	}
	data, err := statefile.Read(path, maxBudgetsBytes)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			log.Warn("egress budgets: cannot read the kept budgets; sessions start from nothing", "file", path, "err", err)
		}
		return b
	}
	var f budgetsFile
	if err := json.Unmarshal(data, &f); err != nil || f.Version != budgetsVersion {
		log.Warn("egress budgets: ignoring a budgets file of another format", "file", path, "err", err)
		return b
	}
	now := time.Now()
	for s, used := range f.Used {
		if len(b.m) < MaxBudgets {
			b.m[s] = &budgetEntry{b: egress.NewBudget(used), touched: now}
		}
	}
	return b
}

// BudgetsFile is where a backend whose state file is stateFile keeps the
// budgets: beside it, in the same private directory; "" (in memory only) for
// none.
func BudgetsFile(stateFile string) string {
	if stateFile == "" {
		return ""
	}
	return stateFile + ".egress"
}

// Of returns session's budget, made (empty) on first use.
func (b *Budgets) Of(session string) *egress.Budget {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.m[session]
	if e == nil {
		if len(b.m) >= MaxBudgets {
			b.evictLocked()
		}
		e = &budgetEntry{b: &egress.Budget{}}
		b.m[session] = e
	}
	e.touched = time.Now()
	return e.b
}

// evictLocked forgets the budget touched longest ago.
func (b *Budgets) evictLocked() {
	var old string
	var at time.Time
	for s, e := range b.m {
		if old == "" || e.touched.Before(at) {
			old, at = s, e.touched
		}
	}
	delete(b.m, old)
}

// Save writes the budgets file, at most once per saveEvery unless now is set
// (a server killed at once loses at most the bytes spent since).
func (b *Budgets) Save(now bool) {
	if b == nil || b.path == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !now && time.Since(b.saved) < saveEvery {
		return
	}
	f := budgetsFile{Version: budgetsVersion, Used: make(map[string]int64, len(b.m))}
	for s, e := range b.m {
		if u := e.b.Used(); u > 0 {
			f.Used[s] = u
		}
	}
	data, err := json.Marshal(f)
	if err == nil {
		err = statefile.Write(b.path, data, false)
	}
	if err != nil {
		b.log.Warn("egress budgets: cannot keep the budgets", "file", b.path, "err", fmt.Errorf("write: %w", err))
		return
	}
	b.saved = time.Now()
}
