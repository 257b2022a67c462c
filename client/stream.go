package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
)

// ExecuteStream runs code like Execute and calls onEvent for each output as the
// server streams it (Server-Sent Events). The call is registered on the server:
// when the connection drops mid-call, ExecuteStream reattaches by the call's id
// and goes on after the last event it delivered (see [Client.Attach]).
func (c *Client) ExecuteStream(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
	resp, err := c.send(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(req.SessionID)+"/execute", req.Body(), "text/event-stream")
	if err != nil {
		return nil, err
	}
	f := &follower{id: resp.Header.Get(callIDHeader), onEvent: onEvent}
	res, done, err := f.read(resp.Body)
	resp.Body.Close()
	if done {
		return res, err
	}
	if f.id == "" {
		return nil, err
	}
	return c.attach(ctx, f, err)
}

// callIDHeader is the header that carries a call's id (httpapi.CallIDHeader).
const callIDHeader = "Kernelbox-Call-Id"

// follower reads one call's event stream across connections: it delivers each
// numbered event once, in order, and remembers the last one.
type follower struct {
	id      string
	last    int64
	onEvent func(api.Event)
}

// read consumes one connection's stream. done is set when the stream carried
// the call's final event (res and err are then the call's answer); otherwise err
// says why the stream ended early.
func (f *follower) read(body io.Reader) (res *api.Result, done bool, err error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	var event, id string
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if event != "" || data.Len() > 0 {
				if res, done, err := f.dispatch(event, id, data.Bytes()); done {
					return res, true, err
				}
			}
			event, id = "", ""
			data.Reset()
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, false, fmt.Errorf("kernelbox: read event stream: %w", err)
	}
	return nil, false, errors.New("kernelbox: event stream ended before the result")
}

// dispatch handles one event; done is set for the final one. Numbered events
// at or before the last one delivered are skipped (never delivered twice).
func (f *follower) dispatch(event, id string, data []byte) (*api.Result, bool, error) {
	if id != "" {
		seq, err := strconv.ParseInt(id, 10, 64)
		if err == nil && seq <= f.last && event != "done" && event != "failed" {
			return nil, false, nil
		}
		if err == nil {
			f.last = seq
		}
	}
	switch event {
	case "call":
		var d api.DetachedCall
		if json.Unmarshal(data, &d) == nil && d.CallID != "" {
			f.id = d.CallID
		}
		return nil, false, nil
	case "done":
		var res api.Result
		if err := json.Unmarshal(data, &res); err != nil {
			return nil, true, fmt.Errorf("kernelbox: decode result: %w", err)
		}
		return &res, true, nil
	case "failed":
		var fl struct {
			Error      api.ErrorDetail `json:"error"`
			HTTPStatus int             `json:"http_status"`
			Result     *api.Result     `json:"result"`
		}
		if err := json.Unmarshal(data, &fl); err != nil {
			return nil, true, fmt.Errorf("kernelbox: decode failure: %w", err)
		}
		return fl.Result, true, &APIError{StatusCode: fl.HTTPStatus, Code: fl.Error.Code, Message: fl.Error.Message}
	default:
		var ev api.Event
		if err := json.Unmarshal(data, &ev); err == nil && f.onEvent != nil {
			f.onEvent(ev)
		}
		return nil, false, nil
	}
}

// Attach follows a call by id: it delivers every event of the call from the
// start (a "truncated" event stands for events the server's log no longer
// holds), exactly once and in order, reconnecting with Last-Event-ID when the
// connection drops, and returns the call's Result as Execute would. Errors the
// server answers (unknown or expired call) end it at once; connection failures
// are retried up to 10 times in a row, backing off from 100 ms to 2 s.
func (c *Client) Attach(ctx context.Context, id string, onEvent func(api.Event)) (*api.Result, error) {
	return c.attach(ctx, &follower{id: id, onEvent: onEvent}, nil)
}

// attach (re)connects f's stream until the call's final event. cause is why
// the previous connection ended, if there was one.
func (c *Client) attach(ctx context.Context, f *follower, cause error) (*api.Result, error) {
	const maxFails = 10
	fails, wait := 0, 100*time.Millisecond
	if cause != nil {
		fails = 1
	}
	for {
		if fails > 0 {
			if fails > maxFails {
				return nil, fmt.Errorf("kernelbox: follow call %s: gave up after %d failed connections: %w", f.id, maxFails, cause)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
			wait = min(2*wait, 2*time.Second)
		}
		before := f.last
		res, done, err := c.followOnce(ctx, f)
		if done {
			return res, err
		}
		var ae *APIError
		if ctx.Err() != nil || (errors.As(err, &ae) && ae.StatusCode < 500) {
			return nil, err
		}
		if f.last > before {
			fails, wait = 0, 100*time.Millisecond
		}
		fails++
		cause = err
	}
}

// followOnce opens one connection to the call's event stream after f.last.
func (c *Client) followOnce(ctx context.Context, f *follower) (*api.Result, bool, error) {
	path := "/v1/calls/" + url.PathEscape(f.id) + "/events"
	var hdr map[string]string
	if f.last > 0 {
		hdr = map[string]string{"Last-Event-ID": strconv.FormatInt(f.last, 10)}
	}
	resp, err := c.sendHeaders(ctx, http.MethodGet, path, nil, "text/event-stream", hdr)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	return f.read(resp.Body)
}
