# berth's build, test, benchmark and fuzz entry points. `make test` is the
# one command that runs the whole test suite (README, .ci/run).
GO        ?= go
BIN       ?= bin/berth
BIN_CLUSTER ?= $(dir $(BIN))berth-cluster
FUZZTIME  ?= 60s
export GOFLAGS ?= -buildvcs=auto

.PHONY: build test test-short bench fuzz tools vet fmt-check image

# berth runs berth-cluster (for agent, fleet, verify, runtimeclasses) from
# the directory it is in, so both are built side by side. berth is linked
# statically (CGO_ENABLED=0): it needs nothing of libc, and the dynamic
# loader and cgo's thread set-up cost about a third of its start-up
# (bench/peers.sh, P0); it also runs on any node's distribution.
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/berth
	$(GO) build -o $(BIN_CLUSTER) ./cmd/berth-cluster

# Tools that integration tests need (real QEMU, containerd, kube-apiserver,
# etcd) are installed or built by tools; the test suite fails loudly if a
# tool is missing rather than skipping.
tools:
	bash .ci/tools.sh

test: tools
	. ./.ci/tools.env 2>/dev/null; $(GO) test -count=1 ./...
	cd tools/ociimage && $(GO) test -count=1 ./...

# The fast subset for a development loop: needs neither root nor the
# tools (.ci/tools.sh does not run), and takes minutes. Under -short, and
# only then, every test that needs root or a tool skips (internal/testkit:
# NeedsTools, NeedsRoot; testenv.Need); `make test` stays the one full run.
test-short:
	$(GO) test -short ./...
	cd tools/ociimage && $(GO) test -short ./...

# The agent's OCI image as a tarball, built without a container engine: the
# static berth-cluster binary (every berth command, plus the agent) at /berth
# on an empty base (tools/ociimage), checked
# after writing. Load it with `docker load`, `ctr -n k8s.io images import`
# or `kind load image-archive`, or push it with `crane push`.
IMAGE_TAR ?= bin/berth-agent-oci.tar
IMAGE_TAG ?= ghcr.io/berth-dev/berth-agent:latest
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
image:
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags '-s -w -X berth.dev/berth/internal/cli/buildinfo.version=$(VERSION)' -o bin/berth-cluster-linux-amd64 ./cmd/berth-cluster
	cd tools/ociimage && $(GO) run . build -binary ../../bin/berth-cluster-linux-amd64 -o ../../$(IMAGE_TAR) -tag $(IMAGE_TAG) -version $(VERSION)
	cd tools/ociimage && $(GO) run . verify ../../$(IMAGE_TAR)

# Benchmarks are never part of `make test`: bench/run.sh runs bench/*.sh,
# bench/peers.sh among them (berth side by side with its peers, the table
# in bench/RESULTS.md).
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...
	bash bench/run.sh

# Runs every fuzz target for FUZZTIME each.
fuzz:
	bash .ci/fuzz.sh $(FUZZTIME)

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
