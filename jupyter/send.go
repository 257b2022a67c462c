package jupyter

import (
	"context"
	"encoding/json"
)

// Send sends a message that has no reply (comm_open, comm_msg, comm_close) on
// the shell or control channel. content must be one JSON object. The kernel's
// iopub messages in answer to it are not delivered: no call waits for them.
func (c *Conn) Send(ctx context.Context, channel, msgType string, content json.RawMessage) error {
	if err := c.Err(); err != nil {
		return err
	}
	m, err := newMessage(c.opts.SessionID, channel, msgType, content)
	if err != nil {
		return err
	}
	return c.send(ctx, m)
}
