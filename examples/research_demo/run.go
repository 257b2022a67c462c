package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// question is what the coordinator is asked.
const question = "Which model gives the best accuracy per parameter on ImageNet, and how has that changed over the years?"

// errUsage reports bad flags; the flag package has already printed why.
var errUsage = errors.New("usage error")

// config is the demo's command line.
type config struct {
	backend   string        // auto, docker or local
	workspace string        // sessions, artifacts and the project directory
	csv       string        // the table to analyse; "" is the embedded copy
	python    string        // interpreter for the local backend
	image     string        // kernel image for the docker backend
	timeout   time.Duration // per sandbox_execute call
	llmSteps  int           // tool calls a model may make
	scripted  bool          // ignore KERNELBOX_LLM_* and follow the plan
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("research_demo", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.backend, "backend", "auto", "where kernels run: auto (docker if the daemon and image are there, else local), docker, or local (UNSANDBOXED)")
	fs.StringVar(&c.workspace, "workspace", ".kernelbox-demo", "directory for the demo's sessions, artifacts and project files")
	fs.StringVar(&c.csv, "csv", "", "benchmark table to analyse, with the columns of data/benchmarks.csv (default: the copy built into the demo)")
	fs.StringVar(&c.python, "python", "", "Python with jupyter_server, ipykernel, pandas and matplotlib, for the local backend (default: KERNELBOX_PYTHON, /usr/bin/python3, python3)")
	fs.StringVar(&c.image, "image", "", "kernel image for the docker backend (default kernelbox/kernel:latest)")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, "timeout of each sandbox_execute call")
	fs.IntVar(&c.llmSteps, "llm-steps", 12, "most tool calls the model may make when KERNELBOX_LLM_BASE_URL is set")
	fs.BoolVar(&c.scripted, "scripted", false, "follow the scripted plan even when KERNELBOX_LLM_BASE_URL is set")
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: go run ./examples/research_demo [flags]\n\n%s\n\nFlags:\n", question)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(out, "unexpected argument %q\n", fs.Arg(0))
		return c, errUsage
	}
	switch c.backend {
	case "auto", "docker", "local":
	default:
		fmt.Fprintf(out, "--backend %q: want auto, docker or local\n", c.backend)
		return c, errUsage
	}
	if c.llmSteps < 1 {
		fmt.Fprintln(out, "--llm-steps must be at least 1")
		return c, errUsage
	}
	return c, nil
}

// run is the whole demo: set up a sandbox, let the coordinator delegate the
// question to the data_analyst, and print every step to stdout.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	p := &printer{w: stdout}
	p.title("kernelbox research demo: a coordinator and a data_analyst agent")

	lab, err := openLab(ctx, cfg, p)
	if err != nil {
		return err
	}
	defer lab.close()

	var analyst analyst
	if llm, ok := llmFromEnv(); ok && !cfg.scripted {
		llm.maxSteps = cfg.llmSteps
		p.field("analyst", fmt.Sprintf("driven by model %s at %s (up to %d tool calls)", llm.model, llm.baseURL, llm.maxSteps))
		analyst = &modelAnalyst{llm: llm, tool: lab.tool, session: lab.session, p: p}
	} else {
		p.field("analyst", "scripted plan (set KERNELBOX_LLM_BASE_URL and KERNELBOX_LLM_MODEL to let a model drive it)")
		analyst = &scriptedAnalyst{tool: lab.tool, session: lab.session, p: p}
	}
	c := &coordinator{p: p, artifactsDir: lab.artifactsDir()}
	return c.answer(ctx, question, analyst)
}
