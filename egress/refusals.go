package egress

import (
	"log/slog"
	"sync"
	"time"
)

// Refusal logging. A kernel can make refusals as fast as it can open
// connections (an earlier pass logged 114,936 lines, 22.9 MB, in 15 s from one
// kernel): each proxy logs the first refusalBurst refusals of a refusalWindow
// one by one, then only counts; the count, with the first and the last refusal
// it stands for, is logged as one line when the next window starts or the proxy
// closes. A proxy thus logs at most refusalBurst+1 refusal lines a window.

const (
	// refusalWindow is the period over which refusal lines are bounded.
	refusalWindow = 10 * time.Second
	// refusalBurst is the refusals logged one by one in a window.
	refusalBurst = 5
)

// refusalLog is one proxy's bounded refusal log. It is safe for concurrent use.
type refusalLog struct {
	mu          sync.Mutex
	start       time.Time // the window's
	logged      int       // lines this window
	count       int64     // refusals counted, not logged, this window
	first, last Record
	timer       *time.Timer // flushes the count at the window's end
}

// note logs or counts a refused connection's record.
func (l *refusalLog) note(log *slog.Logger, r Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.start) >= refusalWindow {
		l.flushLocked(log, r.Session)
		l.start, l.logged = now, 0
	}
	if l.logged < refusalBurst {
		l.logged++
		log.Info("egress refused", "session", r.Session, "host", r.Host, "port", r.Port, "rule", r.Decision.Rule, "reason", r.Decision.Reason)
		return
	}
	if l.count == 0 {
		l.first = r
		l.timer = time.AfterFunc(refusalWindow-now.Sub(l.start), func() { l.flush(log, r.Session) })
	}
	l.count++
	l.last = r
}

// flush logs what was counted and not yet logged.
func (l *refusalLog) flush(log *slog.Logger, session string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked(log, session)
}

func (l *refusalLog) flushLocked(log *slog.Logger, session string) {
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if l.count == 0 {
		return
	}
	log.Info("egress refused, more", "session", session, "count", l.count,
		"first_at", l.first.Start.UTC().Format(time.RFC3339Nano), "first_rule", l.first.Decision.Rule, "first_host", l.first.Host,
		"last_at", l.last.Start.UTC().Format(time.RFC3339Nano), "last_rule", l.last.Decision.Rule, "last_host", l.last.Host,
		"window", refusalWindow.String())
	l.count, l.first, l.last = 0, Record{}, Record{}
}
