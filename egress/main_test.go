package egress

import (
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m, 5*time.Second) }
