package main

import (
	"log/slog"
	"syscall"

	"github.com/kernelbox/kernelbox/egress"
)

// maxEgressConns caps the egress limiter whatever the descriptor limit.
const maxEgressConns = 1 << 18

// egressLimiter raises the process's descriptor limit (RLIMIT_NOFILE) from its
// soft to its hard value and returns the limiter every session's egress proxy
// shares (issue 47 item 1): a quarter of the limit in connections, each holding
// at most two descriptors (the kernel's and the one to the server), so that
// kernels can hold at most half the descriptors and the other half stays for
// the API, the sessions' Jupyter connections and files; one session may hold at
// most a quarter of the limiter (egress.NewLimiter), so that one kernel cannot
// take the others' share. It is nil when the limit cannot be read (the proxies
// are then bounded by their sessions' max_conns alone).
func egressLimiter(log *slog.Logger) *egress.Limiter {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		log.Warn("cannot read the descriptor limit; egress connections are bounded by each session's max_conns only", "err", err)
		return nil
	}
	if rl.Cur < rl.Max {
		raised := rl
		raised.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			log.Warn("cannot raise the descriptor limit to its hard value", "soft", rl.Cur, "hard", rl.Max, "err", err)
		} else {
			rl = raised
		}
	}
	conns := int(min(rl.Cur/4, maxEgressConns))
	l := egress.NewLimiter(conns, 0)
	st := l.Stats()
	log.Debug("egress connection limits", "descriptors", rl.Cur, "all_sessions", st.Max, "one_session", st.PerSession)
	return l
}
