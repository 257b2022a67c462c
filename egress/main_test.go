package egress

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m, 5*time.Second) }

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }
