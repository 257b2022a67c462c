package testexec

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/backends/local"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// SharedServers is how many Jupyter Servers a test binary's SharedLocal backends
// share: two, so that the parallel phase of a package (three tests at a time in
// executor) does not queue every kernel's messages behind one server's event loop.
const SharedServers = 2

// shared is the test binary's pool of local backends behind SharedLocal. It is
// process-wide on purpose: sharing servers among tests is what it is for (a server's
// start is a Python process importing Jupyter Server, 0.7 CPU-seconds and 3 s here,
// which the suite otherwise paid once per test). Production code has no such pool.
var shared struct {
	mu       sync.Mutex
	backends []*local.Backend
	next     int
}

// sharedBackend is one of the pool's backends as an executor sees it: every ability
// of the local backend (embedded, so the executor's type assertions find them) but a
// Close that leaves the server to the next test. The executor shuts down its own
// sessions' and warm pool's kernels before it closes its backend, so no kernel of a
// closed executor stays on the server.
type sharedBackend struct{ *local.Backend }

// Close leaves the shared server running; CloseShared stops it.
func (sharedBackend) Close(context.Context) error { return nil }

// SharedLocal is the local backend on one of the test binary's SharedServers shared
// Jupyter Servers (started on first use; it skips or fails t as testenv.Jupyter
// does), for a test that neither counts processes, kills or stops the server, nor
// needs a server environment of its own: those take LocalWith or LocalBackend, which
// start their own server. The executor it is given does not stop the server: the
// package's TestMain passes CloseShared to leakcheck.Main (and a binary that exits
// without it takes the servers down with it: their supervisors exit when it does).
func SharedLocal(t testing.TB) executor.Backend {
	t.Helper()
	py := testenv.Jupyter(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if len(shared.backends) < SharedServers {
		b, err := local.New(local.Options{Python: py})
		if err != nil {
			t.Fatalf("shared local backend: %v", err)
		}
		shared.backends = append(shared.backends, b)
		return sharedBackend{b}
	}
	b := shared.backends[shared.next%len(shared.backends)]
	shared.next++
	return sharedBackend{b}
}

// CloseShared stops the shared servers (and their kernels) that SharedLocal started.
func CloseShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, b := range shared.backends {
		if err := b.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close a shared local backend: %w", err))
		}
	}
	shared.backends, shared.next = nil, 0
	return errors.Join(errs...)
}
