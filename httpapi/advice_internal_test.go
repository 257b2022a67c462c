package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
)

// The executor's too-many-sessions error states the fact; the HTTP answer adds what
// a client of this API can do about it.
func TestWriteErrAdvice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: 4 sessions are live, the limit", api.ErrTooManySessions),
			"too many sessions: 4 sessions are live, the limit (close one with DELETE /v1/sessions/{id} or `kernelbox reset`, or start the server with a higher --max-sessions)"},
		{fmt.Errorf("%w: code is empty", api.ErrInvalidRequest), "invalid request: code is empty"},
	} {
		w := httptest.NewRecorder()
		writeErr(w, tc.err)
		var body api.ErrorBody
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
		assert.Equal(t, tc.want, body.Error.Message)
	}
	w := httptest.NewRecorder()
	writeErr(w, api.ErrTooManySessions)
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
}
