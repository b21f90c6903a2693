# netio-go — see README.md.
#
#   make demo   install what is missing, build, run netio-perf (loopback sweep)
#   make test   install what is missing, vet, gofmt check, go test -race
#
# Go is looked up on PATH, then in /usr/local/go/bin (where the official
# tarball and the golang images put it).

export PATH := $(PATH):/usr/local/go/bin
export CGO_ENABLED := 1

GO          ?= go
GOFMT       ?= gofmt
# -p: go test runs one package more than there are cores at once (its
# default is as many): the tests wait on the network, timers and child
# processes for about half their wall time, which a third package fills
# on two cores.
TEST_P      ?= $(shell n=$$(getconf _NPROCESSORS_ONLN 2>/dev/null) || n=2; echo $$((n + 1)))
TEST_FLAGS  ?= -race -count=1 -timeout 15m -p $(TEST_P)
BENCH_FLAGS ?= -run '^$$' -bench . -benchmem
BENCH_COMPARE_ARGS ?=
# A count, not a duration: with -fuzztime as a duration, go1.26's fuzz
# coordinator can fail a target with a bare "context deadline exceeded" at
# the deadline (go.dev/issue/75804, reported fixed in Go 1.27). 50000
# inputs take 1-8 s per target here.
FUZZ_TIME   ?= 50000x
SOAK_TIME   ?= 60s
SOAK_LARGE_TIME ?= 20s
DEMO_ARGS   ?= --plot bin/netio-perf.png

# Prerequisites run in the order written (deps before build), even under -j.
.NOTPARALLEL:

.PHONY: all deps build demo test vet fmt-check unit fuzz cgocheck soak bench bench-go clean

all: build

## deps: install libfabric, pkg-config, gcc, make if missing (hack/setup-deps.sh)
deps:
	@bash hack/setup-deps.sh

## build: compile every package and bin/netio-perf
build:
	$(GO) build ./...
	$(GO) build -o bin/netio-perf ./cmd/netio-perf

## demo: set up, build and run netio-perf's loopback sweep; the table, and
## bin/netio-perf.png (bandwidth and latency against message size)
demo: deps build
	./bin/netio-perf $(DEMO_ARGS)

## test: set up, then go vet, gofmt check, the whole test suite with -race
## and cgocheck2, every fuzz target briefly, and a soak with faults
test: deps vet fmt-check unit fuzz soak

## vet: go vet in make unit's build configuration (UNIT_ENV, VET_FLAGS),
## so that what it compiles (every package and its tests) is what make
## unit runs: in a fresh clone, unit then compiles next to nothing itself
VET_FLAGS   ?= -race
vet:
	$(UNIT_ENV) $(GO) vet $(VET_FLAGS) ./...

# Hidden directories (.git, a CI cache) and testdata are not ours to format.
fmt-check:
	@files=$$(find . -path './.*' -prune -o -path '*/testdata' -prune -o -name '*.go' -print | xargs -r $(GOFMT) -l) || exit 1; \
	if [ -n "$$files" ]; then \
		echo "gofmt: these files are not formatted (run gofmt -w on them):"; \
		echo "$$files"; \
		exit 1; \
	fi

## unit: every package's tests with -race and cgocheck2 (UNIT_ENV), which
## checks every pointer passed to C for Go pointers it must not hold: one
## run proves both, instead of a second run of the process tests
UNIT_ENV    ?= GOEXPERIMENT=cgocheck2
## UNIT_PKGS: the packages whose tests take longest come first, so that go
## test, which starts packages in the order named (TEST_P at once), does
## not end with one of them running alone; ./... adds every other package
## once
UNIT_PKGS   ?= ./endpoint ./rdm ./tests/netns ./pubsub ./tests ./hack/benchcompare ./tests/hostile ./tests/storm ./cmd/netio-perf ./...
unit:
	$(UNIT_ENV) $(GO) test $(TEST_FLAGS) $(UNIT_PKGS)

## fuzz: run every fuzz target for FUZZ_TIME inputs on top of its seed corpus
fuzz:
	FUZZ_TIME=$(FUZZ_TIME) GO=$(GO) bash hack/fuzz-brief.sh

## cgocheck: the integration tests (processes, C peer) alone with cgocheck2
## and no race detector (make unit runs them, and everything else, with both)
cgocheck:
	GOEXPERIMENT=cgocheck2 $(GO) test -count=1 -timeout 10m ./tests/

## soak: a mixed workload with faults for SOAK_TIME, and beside it one of
## messages up to 1 MiB (most of them posted through the poller's hand-off)
## for SOAK_LARGE_TIME; fails if either loses, duplicates or corrupts a
## message. Each has its own domain, listener and fault schedule, so they
## run at once: the durations and checks are theirs, the wall time is the
## longer one's.
soak:
	$(GO) build -o bin/soak ./hack/soak
	./bin/soak --duration $(SOAK_LARGE_TIME) --max-size 1048576 & large=$$!; \
	./bin/soak --duration $(SOAK_TIME); mixed=$$?; \
	wait $$large; large=$$?; \
	echo "soak: mixed exit $$mixed, large exit $$large"; \
	[ $$mixed -eq 0 ] && [ $$large -eq 0 ]

## bench: netio-go vs fabtests (FABTESTS_BIN or PATH) vs a C libfabric baseline
## vs Go TCP, two processes then one, one run, ratios (hack/bench-compare)
bench: deps
	bash hack/bench-compare $(BENCH_COMPARE_ARGS)

## bench-go: run the Go benchmarks, no tests
bench-go:
	$(GO) test $(BENCH_FLAGS) ./...

clean:
	rm -rf bin
	rm -f netio-perf tests/cpeer/cpeer
