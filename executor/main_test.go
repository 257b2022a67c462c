package executor_test

import (
	"flag"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/testkit/leakcheck"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

// TestMain fails the package if goroutines outlive its tests.
//
// Parallel tests run together once the sequential ones are done, three at a time
// unless -parallel is given (its default, GOMAXPROCS, is 2 on the CI machine): they
// mostly wait, and a third slot cut their phase from 400 s to 316 s (measured one
// after the other on the 2-core machine, the same load beside both; each test took
// 7% longer). Besides the fake-backend
// tests, a real-kernel test is parallel only when it mostly waits (timeouts, frozen
// servers, killed kernels or containers, idle gaps) and its checks hold whatever
// runs beside it:
//   - local tests that neither count processes, kernels or goroutines nor kill or
//     stop the server share the binary's testexec.SharedServers Jupyter Servers
//     (newEnv: testexec.SharedLocal, stopped after the tests by CloseShared); the
//     others have a server of their own (newOwnEnv);
//   - local tests count and kill only their own backend's kernels (the backend's
//     marker, testexec.Marked), so a waiting local test may be parallel; those that
//     count goroutines or measure memory (TestLocalConcurrency, TestLocalOutputFlood)
//     stay sequential;
//   - the docker tests that count or kill among every container of this process
//     (dockerContainers, ourContainers) or measure host disk space stay sequential;
//   - the parallel docker tests find their containers by session id
//     (sessionContainer, containerOf), so each uses ids no other parallel docker
//     test uses.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(max(3, runtime.GOMAXPROCS(0)))); err != nil {
			panic(err)
		}
	}
	leakcheck.Main(m, 5*time.Second, testexec.CloseShared)
}
