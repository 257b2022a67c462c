package main

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/backends/local"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// benchmarksCSV is the table the demo analyses unless --csv names another.
//
//go:embed data/benchmarks.csv
var benchmarksCSV []byte

// decoyKey is planted in the project directory so that the analyst can try to stage
// it: a file the working-directory rule allows but the SSH-key rules deny.
const decoyKey = "-----BEGIN OPENSSH PRIVATE KEY-----\n" +
	"kernelbox research demo decoy: not a key. The permission policy must refuse to stage it.\n" +
	"-----END OPENSSH PRIVATE KEY-----\n"

// analystTemplate is the data_analyst's session template: a warm kernel, started
// ahead of the analyst's first call, has already imported pandas and matplotlib, so
// the analyst's first cell (which loads the table) waits neither for a kernel nor
// for the imports. The template holds one kernel in its warm pool: the demo has one
// analyst.
var analystTemplate = executor.Template{
	Name:        "analyst",
	Description: "pandas as pd and matplotlib.pyplot as plt already imported, for tabular analysis and charts",
	Warm:        1,
	Preload:     "import pandas as pd\nimport matplotlib.pyplot as plt",
}

// warmWait bounds how long the demo waits for the analyst's warm kernel before
// letting the first call start one itself.
const warmWait = 3 * time.Minute

// lab is the sandbox the agents work in: an executor with its backend, workspace and
// permission engine, and one session for the analyst.
type lab struct {
	exec    *executor.Executor
	ws      *workspace.Manager
	tool    tool  // the analyst's: over HTTP with its scoped key (keys.go)
	keys    *keys // the lab's server and the analyst's key
	session string
}

// openLab builds the executor as a library user would, printing what it chose.
func openLab(ctx context.Context, cfg config, p *printer) (*lab, error) {
	root, err := filepath.Abs(cfg.workspace)
	if err != nil {
		return nil, err
	}
	project := filepath.Join(root, "project")
	if err := writeProject(project, cfg.csv); err != nil {
		return nil, err
	}
	ws, err := workspace.New(workspace.Options{Root: root})
	if err != nil {
		return nil, err
	}
	// The built-in policy, with the project directory as the working directory: the
	// analyst may stage any file in it (inputs are named relative to it), except
	// what the built-in rules deny anywhere, such as SSH keys.
	perm := &permissions.Engine{
		Policy: permissions.DefaultPolicy(),
		Vars:   permissions.Vars{Workdir: project, Home: userHome(), Artifacts: ws.ArtifactsDir()},
	}
	if err := perm.Policy.Validate(perm.Vars); err != nil {
		ws.Close()
		return nil, err
	}
	backend, how, err := openBackend(ctx, cfg)
	if err != nil {
		ws.Close()
		return nil, err
	}
	e, err := executor.New(executor.Options{
		Backend:        backend,
		Workspace:      ws,
		Permissions:    perm,
		DefaultTimeout: cfg.timeout,
		IdleTimeout:    -1, // the demo closes its session itself
		Templates:      []executor.Template{analystTemplate},
	})
	if err != nil {
		_ = backend.Close(context.Background())
		ws.Close()
		return nil, err
	}
	session, err := newSessionID()
	if err != nil {
		_ = e.Close()
		ws.Close()
		return nil, err
	}
	// The session is created with the analyst's template before its first call;
	// whatever then drives the analyst (the plan or a model) gets that kernel.
	if _, err := e.CreateSession(ctx, session, analystTemplate.Name); err != nil {
		_ = e.Close()
		ws.Close()
		return nil, err
	}
	k, err := serveKeys(ctx, e, ws, root, session, analystTemplate.Name)
	if err != nil {
		_ = e.Close()
		ws.Close()
		return nil, err
	}
	l := &lab{
		exec:    e,
		ws:      ws,
		tool:    &keyTool{c: k.analyst, timeout: cfg.timeout},
		keys:    k,
		session: session,
	}
	p.field("backend", how)
	p.field("workspace", root)
	p.field("project", project+" (the policy's working directory: inputs are read from here)")
	p.field("policy", "built-in rules: read the working directory; never credentials or system secrets")
	p.field("tool", toolSignature())
	p.field("session", session)
	p.field("key", k.check(ctx))
	p.field("template", analystTemplate.Name+": "+analystTemplate.Description+"; "+l.waitWarm(ctx))
	p.field("artifacts", l.artifactsDir())
	return l, nil
}

// waitWarm waits, up to warmWait, for the analyst template's warm kernel, and says
// how it went. When none is ready by then (its preload failed, say), the analyst's
// first call starts a kernel itself, and reports a preload error with its traceback.
func (l *lab) waitWarm(ctx context.Context) string {
	start := time.Now()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for l.exec.WarmReadyOf(analystTemplate.Name) == 0 {
		if time.Since(start) > warmWait {
			return fmt.Sprintf("no warm kernel after %s: the first call starts one", warmWait)
		}
		select {
		case <-ctx.Done():
			return "not waiting for a warm kernel: " + ctx.Err().Error()
		case <-t.C:
		}
	}
	return fmt.Sprintf("its warm kernel, past the preload, was ready after %.1f s", time.Since(start).Seconds())
}

// artifactsDir is where the session's artifacts are collected.
func (l *lab) artifactsDir() string { return filepath.Join(l.ws.ArtifactsDir(), l.session) }

// close stops the kernels and the backend and deletes the session's directory.
// Artifacts stay on disk.
func (l *lab) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = l.exec.CloseSession(ctx, l.session) // fails harmlessly if the session never started
	l.keys.close()
	_ = l.exec.Close()
	_ = l.ws.Close()
}

// openBackend picks the backend named by --backend and describes it for the reader.
// auto prefers docker and falls back to local, saying why.
func openBackend(ctx context.Context, cfg config) (executor.Backend, string, error) {
	var dockerErr error
	if cfg.backend == "auto" || cfg.backend == "docker" {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		b, err := docker.New(dctx, docker.Options{Image: cfg.image})
		cancel()
		if err == nil {
			image := cfg.image
			if image == "" {
				image = docker.DefaultImage
			}
			return b, fmt.Sprintf("docker (sandboxed: one container per session from %s, no network, no capabilities, read-only root, non-root user)", image), nil
		}
		if cfg.backend == "docker" {
			return nil, "", err
		}
		dockerErr = err
	}
	b, err := local.New(local.Options{Python: cfg.python})
	if err != nil {
		return nil, "", errors.Join(dockerErr, err)
	}
	how := "local (UNSANDBOXED: the code runs as this user, with this user's files and network; python " + b.Python() + ")"
	if dockerErr != nil {
		how += "\n  docker unavailable: " + firstLine(dockerErr.Error())
	}
	return b, how, nil
}

// writeProject fills the project directory: the table to analyse and a decoy key.
func writeProject(dir, csvPath string) error {
	data := benchmarksCSV
	if csvPath != "" {
		b, err := os.ReadFile(csvPath)
		if err != nil {
			return fmt.Errorf("--csv: %w", err)
		}
		data = b
	}
	if err := os.MkdirAll(filepath.Join(dir, ".ssh"), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "benchmarks.csv"), data, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ".ssh", "id_rsa"), []byte(decoyKey), 0o600)
}

// newSessionID names the analyst's session uniquely, so that a rerun in the same
// workspace gets its own artifacts directory.
func newSessionID() (string, error) {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "data_analyst-" + time.Now().Format("20060102-150405") + "-" + hex.EncodeToString(b[:]), nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// userHome is the home directory for the policy's ${home}, or "" when unknown (the
// engine then looks it up itself).
func userHome() string {
	h, _ := os.UserHomeDir()
	return h
}
