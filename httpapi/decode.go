package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
)

// isJSON reports whether a Content-Type is JSON: application/json or a +json type.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// decode reads a JSON body strictly: unknown fields and trailing data are errors.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("%w: request body over %d bytes", api.ErrInvalidRequest, mbe.Limit)
		}
		if err == io.EOF {
			return fmt.Errorf("%w: empty body; send JSON like {\"code\": \"print(1)\"}", api.ErrInvalidRequest)
		}
		return fmt.Errorf("%w: body: %v", api.ErrInvalidRequest, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: body has data after the JSON object", api.ErrInvalidRequest)
	}
	return nil
}

func (h *handler) request(r *http.Request) (req api.Request, detach bool, err error) {
	var b ExecuteBody
	if err := decode(r, &b); err != nil {
		return api.Request{}, false, err
	}
	if b.TimeoutSeconds < 0 || b.TimeoutSeconds > 1e7 {
		return api.Request{}, false, fmt.Errorf("%w: timeout_seconds must be between 0 and 1e7", api.ErrInvalidRequest)
	}
	if b.MaxWaitSeconds < 0 || b.MaxWaitSeconds > 1e7 {
		return api.Request{}, false, fmt.Errorf("%w: max_wait_seconds must be between 0 and 1e7", api.ErrInvalidRequest)
	}
	return api.Request{
		SessionID: r.PathValue("id"),
		Code:      b.Code,
		Inputs:    b.Inputs,
		Template:  b.Template,
		Timeout:   time.Duration(b.TimeoutSeconds * float64(time.Second)),
		MaxWait:   time.Duration(b.MaxWaitSeconds * float64(time.Second)),
	}, b.Detach, nil
}
