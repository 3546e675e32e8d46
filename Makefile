GO      ?= go
BIN     ?= bin/sluice
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Packages with concurrency run under the race detector.
RACE_PKGS := ./protocol/... ./auth/... ./router/... ./health/... ./proxy/... ./sandbox/...
# How long `make fuzz` fuzzes each target, and at most how long it spends
# shrinking one new input (the default 60s would eat a short run).
FUZZTIME ?= 10s
FUZZMINIMIZETIME ?= 2s

.PHONY: all build run test unit fuzz e2e vet fmt deps deps-test clean

all: build

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/sluice

deps:
	bash scripts/deps.sh server

deps-test:
	bash scripts/deps.sh test

# A local sandbox topology (master, 2 replicas, auth server) with sluice in front.
run: deps build
	./$(BIN) sandbox

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

unit:
	$(GO) test -count=1 ./conf/... ./cmd/...
	$(GO) test -race -count=1 $(RACE_PKGS)

# Fuzz every Fuzz* target of ./protocol for FUZZTIME each. (Plain `go test`
# already replays the committed corpora in protocol/testdata/fuzz.)
fuzz:
	@targets="$$($(GO) test -list '^Fuzz' ./protocol | grep '^Fuzz')"; \
	test -n "$$targets" || { echo "no fuzz targets found"; exit 1; }; \
	failed=""; \
	for t in $$targets; do \
		echo "== $$t ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) ./protocol || failed="$$failed $$t"; \
	done; \
	test -z "$$failed" || { echo "fuzzing failed:$$failed"; exit 1; }

e2e:
	$(GO) test -race -count=1 -timeout 15m ./tests/...

test: deps-test vet unit fuzz e2e

clean:
	rm -rf bin
