package jupyter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/websocket"
)

// Reconnecting: a dropped WebSocket is re-dialled with the same session id, and
// the calls in flight during the drop are watched for replies that were lost.

// reconnect re-dials with the same session id so the server replays what it buffered.
func (c *Conn) reconnect() error {
	if c.opts.ReconnectTimeout < 0 {
		return errors.New("reconnecting is disabled")
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ReconnectTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	delay := 50 * time.Millisecond
	for {
		ws, proto, err := c.dial(ctx)
		if err == nil {
			return c.swap(ws, proto)
		}
		if errors.Is(err, ErrNotFound) {
			return err // the kernel is gone; no point retrying
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		if delay < time.Second {
			delay *= 2
		}
	}
}

// swap puts the re-dialled ws in place of the dropped socket and watches the calls
// that were in flight during the drop. It fails with ErrClosed when Close came
// first.
func (c *Conn) swap(ws *websocket.Conn, proto Protocol) error {
	c.wmu.Lock()
	if c.closing.Load() {
		// Close has already closed the socket it saw; nobody would close this one.
		c.wmu.Unlock()
		ws.Close()
		return ErrClosed
	}
	old := c.ws
	c.ws, c.proto = ws, proto
	c.wmu.Unlock()
	old.Close()
	c.log.Info("kernel websocket reconnected")
	if inflight := c.inflight(); len(inflight) > 0 {
		c.wg.Add(1)
		go c.watchAfterReconnect(inflight)
	}
	return nil
}

// inflight returns the calls waiting now.
func (c *Conn) inflight() []*call {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := make([]*call, 0, len(c.pending))
	for _, cl := range c.pending {
		calls = append(calls, cl)
	}
	return calls
}

// watchAfterReconnect fails calls that can no longer complete: messages the server
// wrote to the dropped socket are lost, so a call whose kernel has gone idle without
// its reply arriving would otherwise wait forever. Only the calls that were in flight
// during the drop are concerned: one started since may not have made the kernel busy
// yet.
func (c *Conn) watchAfterReconnect(inflight []*call) {
	defer c.wg.Done()
	select {
	case <-c.stop:
		return
	case <-time.After(2 * time.Second):
	}
	if !c.anyPending(inflight) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, err := c.client.Kernel(ctx, c.kernelID)
	if err != nil || k.ExecutionState != "idle" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range inflight {
		if c.pending[cl.id] == cl {
			cl.finish(fmt.Errorf("%w: the connection dropped during the call and the reply was lost (the kernel is idle)", ErrConnectionLost))
			delete(c.pending, cl.id)
		}
	}
}
