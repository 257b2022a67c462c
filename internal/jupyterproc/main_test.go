package jupyterproc_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/internal/pyfind"
	"github.com/kernelbox/kernelbox/jupyter"
)

// helperEnv makes the test binary act as a kernelbox that runs a server and a cell,
// then waits to be killed (see TestTreeDiesWithKernelbox). Its value is the cell.
const helperEnv = "KERNELBOX_JUPYTERPROC_HELPER"

func TestMain(m *testing.M) {
	if code, ok := os.LookupEnv(helperEnv); ok {
		os.Exit(helper(code))
	}
	os.Exit(m.Run())
}

// helper starts a server and a kernel, runs code, prints "ready RUNTIMEDIR" and
// blocks until killed.
func helper(code string) int {
	ctx := context.Background()
	py, err := pyfind.Find("")
	if err == nil {
		var s *jupyterproc.Server
		s, err = jupyterproc.Start(ctx, jupyterproc.Options{Python: py, RootDir: "/"})
		if err == nil {
			err = runCell(ctx, s, code)
			if err == nil {
				fmt.Println("ready", s.RuntimeDir())
				select {}
			}
		}
	}
	fmt.Println("error", err)
	return 1
}

func runCell(ctx context.Context, s *jupyterproc.Server, code string) error {
	c, err := jupyter.NewClient(s.Endpoint(), nil)
	if err != nil {
		return err
	}
	k, err := c.StartKernel(ctx, jupyter.StartOptions{})
	if err != nil {
		return err
	}
	conn, err := c.Connect(ctx, k.ID, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	r, err := conn.Run(ctx, code, nil)
	if err != nil {
		return err
	}
	if r.Status != "ok" {
		return fmt.Errorf("cell: %s", r.Status)
	}
	return nil
}
