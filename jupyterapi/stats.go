package jupyterapi

import "sync/atomic"

// DropCause is why the gateway disconnected a client against its will.
type DropCause int

// The causes of a dropped client.
const (
	DropTooSlow      DropCause = iota // it did not read its queue (1008)
	DropMalformed                     // it sent a frame that does not decode (1007)
	DropUnsupported                   // it sent a frame of the wrong type for its protocol (1003)
	DropTooBig                        // it sent a frame over Options.MaxFrameBytes (1009)
	DropWriteTimeout                  // a write to it took over Options.WriteTimeout
	numDropCauses
)

// String is the cause as a metric label.
func (d DropCause) String() string {
	switch d {
	case DropTooSlow:
		return "too_slow"
	case DropMalformed:
		return "malformed"
	case DropUnsupported:
		return "unsupported"
	case DropTooBig:
		return "too_big"
	case DropWriteTimeout:
		return "write_timeout"
	}
	return "unknown"
}

// Stats is a snapshot of the gateway's WebSocket clients, for /metrics.
type Stats struct {
	// ClientsStarted is the clients connected now to kernels started through
	// this API; ClientsWatching those connected to an agent's session.
	ClientsStarted, ClientsWatching int64
	// ClientsV1 is the clients connected now that speak the binary
	// v1.kernel.websocket.jupyter.org subprotocol (the others speak the legacy
	// JSON protocol).
	ClientsV1 int64
	// MessagesIn counts the messages clients sent that decoded; MessagesOut
	// the messages written to clients.
	MessagesIn, MessagesOut int64
	// Dropped counts the clients disconnected against their will, by cause
	// (indexed by DropCause).
	// An orderly close (the client's, a shutdown, a closed session) is not a
	// drop.
	Dropped [numDropCauses]int64
}

// stats is the gateway's live counters.
type stats struct {
	started, watching, v1 atomic.Int64
	in, out               atomic.Int64
	dropped               [numDropCauses]atomic.Int64
}

// Stats returns a snapshot of the gateway's clients. It is safe for concurrent
// use and cheap: a /metrics scrape calls it.
func (g *Gateway) Stats() Stats {
	s := Stats{
		ClientsStarted: g.stats.started.Load(), ClientsWatching: g.stats.watching.Load(), ClientsV1: g.stats.v1.Load(),
		MessagesIn: g.stats.in.Load(), MessagesOut: g.stats.out.Load(),
	}
	for i := range s.Dropped {
		s.Dropped[i] = g.stats.dropped[i].Load()
	}
	return s
}

// connected counts client c in (delta 1) or out (-1) of the clients gauges.
func (g *Gateway) connected(c *client, delta int64) {
	if c.k.agent {
		g.stats.watching.Add(delta)
	} else {
		g.stats.started.Add(delta)
	}
	if c.proto == protoV1 {
		g.stats.v1.Add(delta)
	}
}
