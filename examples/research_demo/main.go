// Command research_demo shows kernelbox the way a multi-agent research pipeline uses
// it, in process: a coordinator receives a research question and delegates the
// analysis to a data_analyst agent, whose one tool, sandbox_execute(code, session_id,
// inputs), runs Python in a stateful kernel through an executor.Executor. The analyst
// loads data/benchmarks.csv into a pandas DataFrame once, then inspects it, computes
// accuracy per parameter, plots it and writes a report in later cells that reuse the
// DataFrame; the PNG and the report land in the shared artifacts directory. Half-way
// it also tries to stage a decoy SSH key, which the permission engine refuses, and
// carries on.
//
//	go run ./examples/research_demo                  # docker if available, else local
//	go run ./examples/research_demo --backend local  # unsandboxed local kernels
//
// Without an LLM the analyst follows a scripted plan (the cells in cells/). With
// KERNELBOX_LLM_BASE_URL and KERNELBOX_LLM_MODEL set, a model behind an
// OpenAI-compatible chat completions endpoint drives the analyst through the same
// tool; see README.md.
//
// Start reading at run (run.go); the tool is in tool.go, the agents in agents.go,
// plan.go and llm.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "research_demo:", err)
		os.Exit(1)
	}
}
