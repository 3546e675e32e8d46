GO      ?= go
BIN     ?= bin/sluice
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Packages with concurrency run under the race detector.
RACE_PKGS := ./protocol/... ./auth/... ./router/... ./health/... ./proxy/... ./sandbox/...

.PHONY: all build run test unit e2e vet fmt deps deps-test clean

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

e2e:
	$(GO) test -race -count=1 -timeout 15m ./tests/...

test: deps-test vet unit e2e

clean:
	rm -rf bin
