package remote_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/backends/remote"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/workspace"
)

// ExampleNew places sessions on two gateways (for example two Jupyter Servers, or an
// Enterprise Gateway) and runs code on them through an executor.
func ExampleNew() {
	ctx := context.Background()
	b, err := remote.New(ctx, remote.Options{
		Gateways: []remote.Gateway{
			{URL: "https://jupyter-a.example.com", Token: os.Getenv("KERNELBOX_GATEWAY_TOKEN")},
			{URL: "https://jupyter-b.example.com", Token: os.Getenv("KERNELBOX_GATEWAY_TOKEN")},
		},
		KernelName:     "python3",
		KernelEnv:      map[string]string{"KERNEL_USERNAME": "agent"},
		CACertFile:     "/etc/kernelbox/gateway-ca.pem",
		HealthInterval: 5 * time.Second,
	})
	if err != nil {
		log.Fatal(err) // remote.ErrTokenRejected, remote.ErrNoGateway, a bad URL, ...
	}
	ws, err := workspace.New(workspace.Options{Root: "/var/lib/kernelbox"})
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()
	e, err := executor.New(executor.Options{Backend: b, Workspace: ws})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close() // also closes the backend
	r, err := e.Execute(ctx, api.Request{
		SessionID: "analysis",
		Code:      "import pandas as pd\ndf = pd.read_csv('inputs/sales.csv')\ndf.to_parquet('outputs/sales.parquet')",
		Inputs:    []string{"/data/sales.csv"}, // pushed through the kernel
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range r.Artifacts { // pulled back through the kernel
		fmt.Println(a.Name, a.SHA256)
	}
}
