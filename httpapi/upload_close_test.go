package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// signalReader yields size bytes of 'x', closing at once it has yielded after.
type signalReader struct {
	left, after int64
	sent        int64
	at          chan struct{}
	once        sync.Once
}

func (r *signalReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.left))
	for i := range p[:n] {
		p[i] = 'x'
	}
	r.left -= int64(n)
	r.sent += int64(n)
	if r.sent >= r.after {
		r.once.Do(func() { close(r.at) })
	}
	return n, nil
}

// TestUploadRacesSessionClose is issue 33 item 7d: a large upload (PUT to the
// session files API) racing DELETE of its session, the client connected all
// along, is answered 201 (it finished first, or created the session anew
// after the close) or 409 session_closed (the close cut it), never 499
// canceled (which says the client went away; before, 11 of 30 were) nor 500;
// and nothing partial is left: the session is gone, or holds the whole file
// and no temporary one.
func TestUploadRacesSessionClose(t *testing.T) {
	t.Parallel() // its own server and sessions, no time bound, nothing counted process-wide
	t.Run("host files (local)", func(t *testing.T) { uploadRace(t, testexec.Local(t, nil), 30, 32<<20) })
	// The files of a remote session live in its kernel, and go through it.
	t.Run("kernel files (remote)", func(t *testing.T) { uploadRace(t, testexec.Remote(t, nil), 10, 8<<20) })
}

// uploadRace runs rounds of a size-byte upload racing DELETE on te.
func uploadRace(t *testing.T, te *testexec.Env, rounds int, size int64) {
	reg := calls.New(te.Exec, calls.Options{})
	t.Cleanup(func() { require.NoError(t, reg.Close()) })
	srv := httptest.NewServer(httpapi.New(te.Exec, httpapi.Options{Token: "tok", Workspace: te.WS, Calls: reg}))
	t.Cleanup(srv.Close)
	_, remote := te.Backend.(interface{ SyncsFiles() bool })

	answers := map[string]int{}
	for i := range rounds {
		id := fmt.Sprintf("race%02d", i)
		resp, b := raw(t, srv, http.MethodPut, "/v1/sessions/"+id+"/files/seed.txt", strings.NewReader("seed"))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)

		// DELETE goes out once part of the upload has (more each round).
		body := &signalReader{left: size, after: int64(i) * size / int64(rounds), at: make(chan struct{})}
		type answer struct {
			status int
			body   []byte
		}
		put := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v1/sessions/"+id+"/files/big.bin", body)
			req.ContentLength = size
			req.Header.Set("Authorization", "Bearer tok")
			resp, err := srv.Client().Do(req)
			if err != nil {
				put <- answer{0, []byte(err.Error())}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			put <- answer{resp.StatusCode, b}
		}()
		<-body.at
		dresp, db := do(t, srv, http.MethodDelete, "/v1/sessions/"+id, "")
		require.Equal(t, http.StatusNoContent, dresp.StatusCode, "DELETE: %s", db)
		a := <-put
		switch {
		case a.status == http.StatusCreated:
			answers["201"]++
		case a.status == http.StatusConflict && errCode(t, a.body) == api.CodeSessionClosed:
			answers["409 session_closed"]++
		default:
			t.Errorf("round %d: the upload got %d: %s", i, a.status, a.body)
			answers[fmt.Sprint(a.status)]++
		}

		// Nothing partial: the session is gone, or was made anew by the upload
		// and holds all of it.
		gresp, gb := do(t, srv, http.MethodGet, "/v1/sessions/"+id, "")
		dir := filepath.Join(te.WS.Root(), "sessions", id)
		switch gresp.StatusCode {
		case http.StatusNotFound:
			_, err := os.Lstat(dir)
			assert.ErrorIs(t, err, os.ErrNotExist, "round %d: the closed session's directory is left", i)
		case http.StatusOK:
			require.Equal(t, http.StatusCreated, a.status, "round %d: a session is there though the upload failed", i)
			if remote {
				lresp, lb := do(t, srv, http.MethodGet, "/v1/sessions/"+id+"/files?path=", "")
				require.Equal(t, http.StatusOK, lresp.StatusCode, "%s", lb)
				assert.Contains(t, string(lb), fmt.Sprintf(`"name":"big.bin","type":"file","size":%d`, size), "round %d", i)
				break
			}
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range entries {
				assert.False(t, strings.HasPrefix(e.Name(), ".kb-tmp-"), "round %d: a temporary file is left: %s", i, e.Name())
			}
			fi, err := os.Stat(filepath.Join(dir, "big.bin"))
			require.NoError(t, err)
			assert.EqualValues(t, size, fi.Size(), "round %d", i)
		default:
			t.Fatalf("round %d: GET session: %d %s", i, gresp.StatusCode, gb)
		}
	}
	t.Logf("upload answers over %d rounds: %v", rounds, answers)
}
