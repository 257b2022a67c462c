package kernelfs_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/kernelfs"
)

// A Syncer keeps one session's host directory and its remote kernel's working
// directory in step around each call; the executor drives it through its
// FileSyncer interface. This example needs a live kernel connection, so it is
// compiled but not run.
func ExampleSyncer() {
	ctx := context.Background()
	var conn *jupyter.Conn // the session's kernel connection, lent per call
	hostDir := "/var/lib/kernelbox/sessions/s1"

	s := kernelfs.New(kernelfs.Options{RemoteDir: "kernelbox-sessions"})
	// Before the call: the staged inputs reach the kernel's inputs/.
	if err := s.PushInputs(ctx, conn, hostDir, []string{"data.csv"}); err != nil {
		fmt.Println(err)
		return
	}
	// The call's execute_request carries s.OutputsProbe() as a user expression;
	// its result tells PullOutputs whether outputs/ changed.
	var probe json.RawMessage
	_ = s.OutputsProbe()
	if err := s.PullOutputs(ctx, conn, hostDir, probe); err != nil {
		fmt.Println(err)
	}
}

// The typed operations of the kernel side, one method each.
func ExampleKernel() {
	ctx := context.Background()
	var conn *jupyter.Conn // a live kernel connection
	var k kernelfs.Kernel
	// The nonce is 128 random bits drawn for this incarnation of the session.
	req := kernelfs.SetupRequest{Base: "kernelbox-sessions", SID: "s1", Nonce: "6f1c0e9a4b2d83f7a5e19c0b7d4f2a68"}
	if _, err := k.Setup(ctx, conn, req); err != nil {
		fmt.Println(err)
		return
	}
	ls, err := k.List(ctx, conn, kernelfs.ListRequest{Max: 1000, Depth: kernelfs.MaxDepth, Inline: 100})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range ls.Files {
		fmt.Println(f.Rel, f.Stat.Size())
	}
}
