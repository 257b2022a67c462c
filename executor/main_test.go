package executor_test

import (
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/leakcheck"
)

// TestMain fails the package if goroutines outlive its tests.
//
// Parallel tests run together once the sequential ones are done, two at a time on
// the 2-core CI machine (-parallel defaults to GOMAXPROCS). Besides the fake-backend
// tests, a real-kernel test is parallel only when it mostly waits (timeouts, frozen
// servers, killed kernels or containers, idle gaps) and its checks hold whatever
// runs beside it:
//   - local tests count and kill only their own backend's kernels (the backend's
//     marker, testexec.Marked), so a waiting local test may be parallel; those that
//     count goroutines or measure memory (TestLocalConcurrency, TestLocalOutputFlood)
//     stay sequential;
//   - the docker tests that count or kill among every container of this process
//     (dockerContainers, ourContainers) or measure host disk space stay sequential;
//   - the parallel docker tests find their containers by session id
//     (sessionContainer, containerOf), so each uses ids no other parallel docker
//     test uses.
func TestMain(m *testing.M) { leakcheck.Main(m, 5*time.Second) }
