# kernelbox: the two commands the README starts with are `make demo` and `make test`.
# Both install what they need (Debian packages, the Docker kernel image) first.

GO ?= go
export PATH := $(PATH):/usr/local/go/bin
# bash, so that a pipe's failure is the recipe's (make test pipes go test's events).
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c

.PHONY: demo test setup image serve-image build vet pytest bench bench-short bench-swarm clean

# The research demo: a coordinator and a data_analyst agent analysing an ImageNet
# table in one stateful session (docker when available, else local).
demo: setup image
	$(GO) run ./examples/research_demo

# Everything CI runs: formatting, vet, the race-enabled tests (real Jupyter Server and,
# where a daemon is reachable, real Docker) and a short benchmark so it cannot rot.
# scripts/gotest.sh runs the Go tests one package at a time (-p 1): the integration
# tests start real kernels, containers and a browser and check time bounds, and on the
# 2-core machine two such packages at once made kernel and container starts up to 3x
# slower and saved no time (measured in the script's comment). Tests inside a package
# still run in parallel. It prints the slowest tests at the end.
test: setup image vet pytest
	GO=$(GO) bash scripts/gotest.sh
	@began=$$(date +%s) && $(GO) run ./cmd/kernelbox bench --short --backends $(BENCH_BACKENDS) --scenarios $(BENCH_SHORT) && \
		$(GO) run ./cmd/kernelbox bench --short --backends local --scenarios analyst && \
		echo "== bench --short took $$(( $$(date +%s) - began )) s"

setup:
	bash scripts/setup.sh

# Builds kernelbox/kernel:latest from Debian packages when a Docker daemon is
# reachable and the image is missing (reused when present), and kernelbox/kernel-r:latest
# on top of it (R + IRkernel: one ~64 MB layer, ~45 s when missing).
image:
	@if docker version >/dev/null 2>&1; then \
		$(GO) run ./cmd/kernelbox image build --with r; \
	else \
		echo "image: no Docker daemon reachable; skipping the kernel image (the docker backend and its tests need it)"; \
	fi

# kernelbox/serve:latest, the static binary alone, for `serve --backend swarm` in a
# container on a swarm manager (docs/swarm.md).
serve-image:
	bash scripts/serve-image.sh

build:
	$(GO) build -o bin/kernelbox ./cmd/kernelbox

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The Python half of the remote backend's file sync (standard-library unittest, with
# Debian's python3 and its ipykernel, as the kernels run it), then the Python client
# package (python/: its tests build the binary and start real `kernelbox serve`s,
# local and, when Docker is reachable, docker; KERNELBOX_REQUIRE_JUPYTER=1 makes a
# missing Jupyter fail them instead of skipping), then the Python research demo.
PYTHON3 ?= /usr/bin/python3
pytest:
	$(PYTHON3) -B -m unittest discover -s kernelfs -p 'test_*.py'
	@began=$$(date +%s) && $(PYTHON3) -B -W ignore::ResourceWarning -m unittest discover -s python/tests -p 'test_*.py' && \
		echo "== python client tests took $$(( $$(date +%s) - began )) s"
	$(PYTHON3) -B -m unittest discover -s examples/research_demo_py -p 'test_*.py'

# make test's short bench runs every scenario on every backend but the analyst's, which
# runs on local only: its code (templates, warm pools, preloads) is the same on every
# backend, and on docker it adds about 40 s of container starts (make bench runs it all).
BENCH_SHORT := cold,trivial,http,stream,lines,stage,restage,artifacts,warm,egress,coldresume
BENCH_BACKENDS := $(shell docker version >/dev/null 2>&1 && echo local,docker || echo local)

bench: setup image
	$(GO) run ./cmd/kernelbox bench --backends $(BENCH_BACKENDS) --density

# The swarm backend beside the docker backend in one run (docs/benchmarks.md): the swarm
# test package's three-node lab, its burst (TestSessionsSpread, whose numbers the
# comparison reuses) and TestBesideDocker, which make test skips (a measurement, 93 s).
bench-swarm: setup image
	KERNELBOX_SWARM_COMPARE=1 KERNELBOX_REQUIRE_SWARM=1 KERNELBOX_REQUIRE_DOCKER=1 \
		$(GO) test -count=1 -v -timeout 30m -run '^(TestSessionsSpread|TestBesideDocker)$$' ./backends/swarm

clean:
	rm -rf bin .kernelbox .kernelbox-demo
