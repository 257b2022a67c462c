package calls_test

import (
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/testkit/leakcheck"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
)

func TestMain(m *testing.M) { leakcheck.Main(m, 5*time.Second, testexec.CloseShared) }
