package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/backends/swarm"
	"github.com/kernelbox/kernelbox/internal/pyfind"
)

func doctorCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("doctor", stderr)
	python := fs.String("python", "", "Python to check (default: KERNELBOX_PYTHON, /usr/bin/python3, python3)")
	image := fs.String("image", docker.DefaultImage, "kernel image to check")
	var memory sizeFlag
	fs.Var(&memory, "memory", "per-session memory limit to check against the docker daemon's memory (as for serve)")
	maxSessions := fs.Int("max-sessions", 0, "session cap to check against the docker daemon's memory (as for serve)")
	swarmHost := fs.String("swarm-host", "", "also check a swarm manager's daemon for --backend swarm, e.g. unix:///var/run/docker.sock: nodes ready, each daemon with no-new-privileges and the image (runs a short probe job on every node)")
	if err := parse(fs, args); err != nil {
		return err
	}
	ok := true
	report := func(good bool, what, detail, fix string) {
		mark := "ok  "
		if !good {
			mark, ok = "FAIL", false
		}
		fmt.Fprintf(stdout, "[%s] %-22s %s\n", mark, what, detail)
		if !good && fix != "" {
			fmt.Fprintf(stdout, "       fix: %s\n", fix)
		}
	}

	py, err := pyfind.Find(*python)
	if err != nil {
		report(false, "python + jupyter", err.Error(), "bash scripts/setup.sh  (or: apt-get install python3-jupyter-server python3-ipykernel python3-pandas python3-matplotlib)")
	} else {
		ver := pythonVersions(ctx, py)
		report(true, "python + jupyter", py+" "+ver, "")
	}

	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, "docker", "version", "--format", "{{.Server.Version}} (API {{.Server.APIVersion}})").CombinedOutput()
	if err != nil {
		report(false, "docker engine", strings.TrimSpace(string(out)), "install and start Docker (Debian: apt-get install docker.io) to use --backend docker")
	} else {
		report(true, "docker engine", strings.TrimSpace(string(out)), "")
		has, err := docker.ImageExists(cctx, *image)
		switch {
		case err != nil:
			report(false, "kernel image", err.Error(), "")
		case !has:
			report(false, "kernel image", *image+" is missing", "kernelbox image build  (or: bash backends/docker/kernel-image/build.sh)")
		default:
			report(true, "kernel image", *image, "")
		}
		// What serve would promise docker sessions with these flags.
		plan, err := dockerCapacity(cctx, memory, *maxSessions)
		if err != nil {
			report(false, "docker capacity", err.Error(), "")
		} else {
			report(!plan.Overcommitted(), "docker capacity", plan.String(), plan.Warning("--memory", "--max-sessions"))
		}
	}
	if *swarmHost != "" {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		detail, err := swarm.Check(sctx, swarm.Options{DockerHost: *swarmHost, Image: *image, Self: "doctor"})
		cancel()
		if err != nil {
			report(false, "swarm", err.Error(), `each node's daemon.json needs "no-new-privileges": true and the image (docker save IMAGE | docker -H NODE load); see docs/swarm.md`)
		} else {
			report(true, "swarm", detail, "")
		}
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		report(false, "debootstrap", "not found (needed only to build the kernel image)", "apt-get install debootstrap")
	} else {
		report(true, "debootstrap", "found", "")
	}
	if !ok {
		return exitCode{1, "some checks failed; see the fixes above"}
	}
	return nil
}

func pythonVersions(ctx context.Context, py string) string {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, py, "-c",
		"import sys, jupyter_server, ipykernel; print('python %d.%d, jupyter_server %s, ipykernel %s' % (sys.version_info[0], sys.version_info[1], jupyter_server.__version__, ipykernel.__version__))").Output()
	if err != nil {
		return ""
	}
	return "(" + strings.TrimSpace(string(out)) + ")"
}
