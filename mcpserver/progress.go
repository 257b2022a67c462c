package mcpserver

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/api"
)

// maxProgressText caps the text of one progress notification; older text is
// skipped (the final result has all of it, within its own budget).
const maxProgressText = 4096

// progress forwards one call's events to the client as progress notifications, at
// most one per interval. The executor calls event from the session's worker, which
// must not block, so event only buffers and wakes the sender: one goroutine, owned by
// the progress and ended by stop.
type progress struct {
	ss     *mcp.ServerSession
	token  any
	every  time.Duration
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	pending []byte // text not sent yet, at most maxProgressText
	skipped int    // bytes dropped from the head of pending since the last send
	events  int    // events so far: the progress value, which must grow
}

// startProgress starts forwarding to ss, for the request with the given progress
// token. Notifications are sent under ctx (the request's), so that a streamable HTTP
// transport routes them to the request's response stream.
func startProgress(ctx context.Context, ss *mcp.ServerSession, token any, every time.Duration) *progress {
	ctx, cancel := context.WithCancel(ctx)
	p := &progress{ss: ss, token: token, every: every, ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	go p.run()
	return p
}

// event buffers one executor event. It never blocks.
func (p *progress) event(ev api.Event) {
	text := eventText(ev)
	p.mu.Lock()
	p.events++
	p.pending = append(p.pending, text...)
	if over := len(p.pending) - maxProgressText; over > 0 {
		cut := over
		for cut < len(p.pending) && !utf8.RuneStart(p.pending[cut]) {
			cut++
		}
		p.skipped += cut
		p.pending = append(p.pending[:0], p.pending[cut:]...)
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// stop ends forwarding and waits for the sender. Text still buffered is not sent:
// the result, which follows at once, has it.
func (p *progress) stop() {
	p.cancel()
	<-p.done
}

func (p *progress) run() {
	defer close(p.done)
	var last time.Time
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		}
		if wait := p.every - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-p.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		p.mu.Lock()
		msg := string(p.pending)
		if p.skipped > 0 {
			msg = fmt.Sprintf("[... %s bytes of output skipped ...]\n", count(p.skipped)) + msg
		}
		n := p.events
		p.pending, p.skipped = p.pending[:0], 0
		p.mu.Unlock()
		last = time.Now()
		err := p.ss.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: float64(n), Message: msg})
		if err != nil && p.ctx.Err() == nil {
			// The client went away or the transport failed; the call itself goes on
			// and its result reports everything.
			return
		}
	}
}

// eventText is how an event reads in a progress message.
func eventText(ev api.Event) string {
	switch ev.Type {
	case "stream":
		return ev.Text
	case "status":
		switch ev.State {
		case "queued":
			return "[waiting for the session's earlier calls]\n"
		case "starting":
			return "[starting a kernel]\n"
		case "running":
			return "[running]\n"
		}
	case "display", "update_display", "result":
		if ev.Output == nil {
			return ""
		}
		types := make([]string, 0, len(ev.Output.Data))
		for t := range ev.Output.Data {
			types = append(types, t)
		}
		sort.Strings(types)
		return "[" + ev.Type + ": " + strings.Join(types, ", ") + "]\n"
	case "error":
		if ev.Output != nil {
			return "[error: " + joinNonEmpty(": ", ev.Output.Ename, ev.Output.Evalue) + "]\n"
		}
	}
	return ""
}
