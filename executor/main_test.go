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
// or killed containers, idle gaps) and its checks hold whatever runs beside it:
//   - TestLocalSoak is the one parallel test that starts local kernels, since it
//     counts every kernel process of this test binary (countKernels) at its end;
//   - the docker tests that count or kill among every container of this process
//     (dockerContainers, ourContainers) or measure host disk space stay sequential;
//   - the parallel docker tests find their containers by session id
//     (sessionContainer, containerOf), so each uses ids no other parallel test uses.
//
// So the local soak runs in one slot while the waiting docker tests run in the other.
func TestMain(m *testing.M) { leakcheck.Main(m, 5*time.Second) }
