package jupyter

import (
	"context"
	"encoding/json"
)

// Send sends a message that has no reply (comm_open, comm_msg, comm_close) on
// the shell or control channel. content must be one JSON object. The kernel's
// iopub messages in answer to it reach the SetUnclaimed function, if any:
// no call waits for them. msgID is the message's msg_id, chosen by the caller
// (a UUID) so that it can route the answers before any arrives; "" makes one.
func (c *Conn) Send(ctx context.Context, msgID, channel, msgType string, content json.RawMessage) error {
	if err := c.Err(); err != nil {
		return err
	}
	m, err := newMessage(c.opts.SessionID, channel, msgType, content)
	if err != nil {
		return err
	}
	if msgID != "" {
		m.Header.MsgID = msgID
	}
	return c.send(ctx, m)
}

// SetUnclaimed has fn called with each message that has a parent but answers
// no call waiting on this connection: the kernel's answers to what Send sent
// (comm messages), and output of calls that have ended. fn runs on the
// connection's reader goroutine and must not block. nil stops the calls.
func (c *Conn) SetUnclaimed(fn func(*Message)) {
	if fn == nil {
		c.unclaimed.Store(nil)
		return
	}
	c.unclaimed.Store(&fn)
}
