// Package capacity decides how many sessions fit in the memory they share, so that
// kernelbox never promises its sessions more memory than the machine has: the
// per-session memory limit times the number of sessions must fit in the host's (or
// the Docker daemon's) memory, less a reserve for the system and kernelbox itself.
// It is a pure function of its input; start reading at [Make].
package capacity

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bounds of the plan.
const (
	// MinReserve is the least memory kept back from the sessions.
	MinReserve = 1 << 30
	// ReserveFraction is the share of memory kept back, when more than MinReserve.
	ReserveFraction = 10 // percent
	// MaxSessions is the most sessions a derived plan allows, however much memory
	// there is: each also costs processes, CPU time and file descriptors.
	MaxSessions = 64
)

// Input is what a plan is made from.
type Input struct {
	// Memory is the memory, in bytes, that the sessions share: the Docker daemon's
	// MemTotal for containers, the host's for local kernels.
	Memory int64

	// SessionMemory is each session's memory limit in bytes as configured; 0 means
	// derive it: DefaultSessionMemory, or less when the budget is smaller.
	SessionMemory int64

	// DefaultSessionMemory is the per-session limit used when SessionMemory is 0.
	DefaultSessionMemory int64

	// MaxSessions is the session cap as configured; 0 means derive it from the
	// budget.
	MaxSessions int
}

// Plan is the decision: the figures it rests on and the two values it sets.
type Plan struct {
	Memory  int64 // what the sessions share, as given
	Reserve int64 // kept back: ReserveFraction of Memory, at least MinReserve
	Budget  int64 // Memory - Reserve: what the sessions may be promised

	SessionMemory        int64 // each session's limit
	SessionMemoryDerived bool  // SessionMemory was not configured
	MaxSessions          int   // the session cap
	MaxSessionsDerived   bool  // MaxSessions was not configured
}

// Make plans the sessions' memory. With nothing configured, the per-session limit
// is the default (or the whole budget when that is smaller) and the session cap is
// as many such sessions as the budget holds, between 1 and [MaxSessions]. Configured
// values are kept as they are, even when they overcommit: [Plan.Overcommitted] says
// so. Input.Memory <= 0 (unknown) gives a plan with no budget, which never derives
// a cap and never reports overcommitment.
func Make(in Input) Plan {
	p := Plan{Memory: in.Memory, SessionMemory: in.SessionMemory, MaxSessions: in.MaxSessions}
	if in.Memory > 0 {
		p.Reserve = max(in.Memory/100*ReserveFraction, MinReserve)
		if p.Reserve >= in.Memory {
			p.Reserve = in.Memory / 2
		}
		p.Budget = in.Memory - p.Reserve
	}
	if p.SessionMemory == 0 {
		p.SessionMemoryDerived = true
		p.SessionMemory = in.DefaultSessionMemory
		if p.Budget > 0 && p.SessionMemory > p.Budget {
			p.SessionMemory = p.Budget
		}
	}
	if p.MaxSessions == 0 && p.Budget > 0 && p.SessionMemory > 0 {
		p.MaxSessionsDerived = true
		p.MaxSessions = int(min(max(p.Budget/p.SessionMemory, 1), MaxSessions))
	}
	return p
}

// Promised is the memory the sessions may take together: MaxSessions times
// SessionMemory, or 0 when either is unknown or unlimited.
func (p Plan) Promised() int64 {
	if p.MaxSessions <= 0 || p.SessionMemory <= 0 {
		return 0
	}
	return int64(p.MaxSessions) * p.SessionMemory
}

// Overcommitted reports whether the sessions may be promised more than the budget.
func (p Plan) Overcommitted() bool {
	return p.Budget > 0 && p.Promised() > p.Budget
}

// Warning explains an overcommitted plan, naming the flags that set it, or returns
// "" for one that fits. memoryFlag and sessionsFlag are the flags' names as the user
// types them ("--memory", "--max-sessions").
func (p Plan) Warning(memoryFlag, sessionsFlag string) string {
	if !p.Overcommitted() {
		return ""
	}
	fits := max(p.Budget/p.SessionMemory, 1)
	return fmt.Sprintf("%s %d x %s %s = %s promised to sessions, more than the %s budget (%s of memory less a %s reserve): "+
		"sessions that all use their limit will be OOM-killed or swap the host; use %s %d or a smaller %s",
		sessionsFlag, p.MaxSessions, memoryFlag, FormatBytes(p.SessionMemory), FormatBytes(p.Promised()),
		FormatBytes(p.Budget), FormatBytes(p.Memory), FormatBytes(p.Reserve), sessionsFlag, fits, memoryFlag)
}

// String lists the plan's figures on one line, for `kernelbox doctor` and logs.
func (p Plan) String() string {
	var b strings.Builder
	if p.Memory > 0 {
		fmt.Fprintf(&b, "memory %s, reserve %s, budget %s; ", FormatBytes(p.Memory), FormatBytes(p.Reserve), FormatBytes(p.Budget))
	} else {
		b.WriteString("memory unknown; ")
	}
	fmt.Fprintf(&b, "%s per session%s x %d sessions%s = %s",
		FormatBytes(p.SessionMemory), derived(p.SessionMemoryDerived), p.MaxSessions, derived(p.MaxSessionsDerived), FormatBytes(p.Promised()))
	if p.Overcommitted() {
		b.WriteString(" (OVERCOMMITTED)")
	}
	return b.String()
}

func derived(d bool) string {
	if d {
		return " (default)"
	}
	return ""
}

// FormatBytes writes n in binary units with one decimal: "2.0 GiB", "384.0 MiB".
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// ParseBytes reads a size: a whole number of bytes, or a number with a binary unit
// suffix k, m, g or t (case-insensitive, optionally followed by "b" or "ib"), as in
// "512m", "2g", "1.5GiB".
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "b")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		case 't':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("size %q: want bytes or a number with k, m, g or t", s)
	}
	return int64(v * float64(mult)), nil
}
