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
TEST_FLAGS  ?= -race -count=1 -timeout 15m
BENCH_FLAGS ?= -run '^$$' -bench . -benchmem
BENCH_COMPARE_ARGS ?=
DEMO_ARGS   ?=

# Prerequisites run in the order written (deps before build), even under -j.
.NOTPARALLEL:

.PHONY: all deps build demo test vet fmt-check unit bench bench-go clean

all: build

## deps: install libfabric, pkg-config, gcc, make if missing (hack/setup-deps.sh)
deps:
	@bash hack/setup-deps.sh

## build: compile every package and bin/netio-perf
build:
	$(GO) build ./...
	$(GO) build -o bin/netio-perf ./cmd/netio-perf

## demo: set up, build and run netio-perf's loopback sweep
demo: deps build
	./bin/netio-perf $(DEMO_ARGS)

## test: set up, then go vet, gofmt check and the whole test suite with -race
test: deps vet fmt-check unit

vet:
	$(GO) vet ./...

# Hidden directories (.git, a CI cache) and testdata are not ours to format.
fmt-check:
	@files=$$(find . -path './.*' -prune -o -path '*/testdata' -prune -o -name '*.go' -print | xargs -r $(GOFMT) -l) || exit 1; \
	if [ -n "$$files" ]; then \
		echo "gofmt: these files are not formatted (run gofmt -w on them):"; \
		echo "$$files"; \
		exit 1; \
	fi

unit:
	$(GO) test $(TEST_FLAGS) ./...

## bench: netio-go vs a C libfabric baseline vs Go TCP, one run, ratios (hack/bench-compare)
bench: deps
	bash hack/bench-compare $(BENCH_COMPARE_ARGS)

## bench-go: run the Go benchmarks, no tests
bench-go:
	$(GO) test $(BENCH_FLAGS) ./...

clean:
	rm -rf bin
	rm -f netio-perf tests/cpeer/cpeer
