package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/kernelbox/kernelbox/api"
)

// ExecuteStream runs code like Execute and calls onEvent for each output as the
// server streams it (Server-Sent Events).
func (c *Client) ExecuteStream(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
	resp, err := c.send(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(req.SessionID)+"/execute", req.Body(), "text/event-stream")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	var event string
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if event != "" || data.Len() > 0 {
				res, done, err := dispatch(event, data.Bytes(), onEvent)
				if done {
					return res, err
				}
			}
			event = ""
			data.Reset()
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("kernelbox: read event stream: %w", err)
	}
	return nil, errors.New("kernelbox: event stream ended before the result")
}

// dispatch handles one event; done is set for the final one.
func dispatch(event string, data []byte, onEvent func(api.Event)) (*api.Result, bool, error) {
	switch event {
	case "done":
		var res api.Result
		if err := json.Unmarshal(data, &res); err != nil {
			return nil, true, fmt.Errorf("kernelbox: decode result: %w", err)
		}
		return &res, true, nil
	case "failed":
		var f struct {
			Error      api.ErrorDetail `json:"error"`
			HTTPStatus int             `json:"http_status"`
			Result     *api.Result     `json:"result"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, true, fmt.Errorf("kernelbox: decode failure: %w", err)
		}
		return f.Result, true, &APIError{StatusCode: f.HTTPStatus, Code: f.Error.Code, Message: f.Error.Message}
	default:
		var ev api.Event
		if err := json.Unmarshal(data, &ev); err == nil && onEvent != nil {
			onEvent(ev)
		}
		return nil, false, nil
	}
}
