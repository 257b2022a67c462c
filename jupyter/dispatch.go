package jupyter

// Dispatching: each message the reader decodes goes to the call it answers.

// dispatch routes one message to the call it answers.
func (c *Conn) dispatch(m *Message) {
	if m.Channel == ChannelIOPub && m.Header.MsgType == "status" && m.ParentHeader.MsgID == "" {
		var st StatusContent
		_ = m.DecodeContent(&st)
		if st.ExecutionState == "restarting" || st.ExecutionState == "dead" {
			c.kernelDied(st.ExecutionState)
		}
		return
	}
	parent := m.ParentHeader.MsgID
	if parent == "" {
		return
	}
	c.mu.Lock()
	cl := c.pending[parent]
	c.mu.Unlock()
	if cl == nil {
		if f := c.unclaimed.Load(); f != nil {
			(*f)(m)
		}
		if m.Channel == ChannelIOPub && m.Header.MsgType == "shutdown_reply" {
			// The kernel answered a shutdown someone else asked for (its server
			// stopping, a restart over REST): it is going away.
			c.kernelDied("shutdown")
		}
		if m.Channel == ChannelIOPub && isOutput(m.Header.MsgType) {
			// Output of a call that has ended: a background thread or process
			// of it still writing. Nobody waits for it; it is counted.
			c.strayMsgs.Add(1)
			c.strayBytes.Add(m.size())
		}
		return // a message for someone else, or for a call already finished
	}
	switch {
	case m.Channel == ChannelShell || m.Channel == ChannelControl:
		cl.started.Store(true)
		cl.inCode.Store(false)
		cl.reply = m
		if !cl.execute || cl.idle {
			c.complete(cl)
		}
	case m.Channel != ChannelIOPub || !cl.execute:
		// stdin requests cannot happen (allow_stdin is false); iopub traffic of
		// non-execute requests is of no interest.
	case m.Header.MsgType == "status":
		var st StatusContent
		_ = m.DecodeContent(&st)
		cl.started.Store(true)
		if st.ExecutionState == "idle" {
			cl.idle = true
			cl.inCode.Store(false)
			if cl.reply != nil {
				c.complete(cl)
			} else if cl.lostTimer == nil {
				c.awaitReply(cl)
			}
		}
	case m.Header.MsgType == "execute_input":
		cl.started.Store(true)
		if !cl.idle && cl.reply == nil {
			cl.inCode.Store(true)
		}
	default:
		if isOutput(m.Header.MsgType) && !cl.idle && cl.reply == nil {
			// Output comes from the code: a silent request (no execute_input)
			// shows that it runs by its first output.
			cl.inCode.Store(true)
		}
		c.queue(cl, m)
	}
}

// queue hands an output message to its execution, first waiting while the
// execution holds more than maxQueuedBytes its reader has not taken. It gives up
// when the caller abandons the call or the connection is closed.
func (c *Conn) queue(cl *call, m *Message) {
	size := m.size()
	for cl.queued.Load() > 0 && cl.queued.Load()+size > maxQueuedBytes {
		select {
		case <-cl.taken:
		case <-cl.gone:
			return
		case <-c.stop:
			return
		}
	}
	cl.queued.Add(size)
	select {
	case cl.msgs <- m:
	case <-cl.gone:
	case <-c.stop:
	}
}

// maxQueuedBytes bounds the output an execution holds that its reader has not taken
// yet (one message is always let through, whatever its size).
const maxQueuedBytes = 16 << 20

// size is the memory a message holds, roughly.
func (m *Message) size() int64 {
	n := len(m.Content) + len(m.Metadata)
	for _, b := range m.Buffers {
		n += len(b)
	}
	return int64(n)
}

// isOutput reports whether an iopub message type is output a cell produces.
func isOutput(msgType string) bool {
	switch msgType {
	case "stream", "display_data", "update_display_data", "execute_result", "error":
		return true
	}
	return false
}

// TakeStray returns how many output messages (and their bytes) arrived for calls
// that had already ended since the last TakeStray, and resets the count. They come
// from background threads or processes of an earlier cell; they were dropped.
func (c *Conn) TakeStray() (msgs, bytes int64) {
	return c.strayMsgs.Swap(0), c.strayBytes.Swap(0)
}
