# berth's build, test, benchmark and fuzz entry points. `make test` is the
# one command that runs the whole test suite (README, .ci/run).
GO        ?= go
BIN       ?= bin/berth
FUZZTIME  ?= 60s
export GOFLAGS ?= -buildvcs=auto

.PHONY: build test bench fuzz tools vet fmt-check

build:
	$(GO) build -o $(BIN) ./cmd/berth

# Tools that integration tests need (real QEMU, containerd, kube-apiserver,
# etcd) are installed or built by tools; the test suite fails loudly if a
# tool is missing rather than skipping.
tools:
	bash .ci/tools.sh

test: tools
	. ./.ci/tools.env 2>/dev/null; $(GO) test -count=1 ./...

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
