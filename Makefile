GO      ?= go
BIN     ?= bin/sluice
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
# The commit's time (Unix seconds): the files' time inside the .deb and the
# date of an untagged package version (see deploy/deb/main.go).
COMMIT_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
# How many commits lead to HEAD: orders untagged package versions of one day.
COMMIT_COUNT ?= $(shell git rev-list --count HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# Where make package writes dist/sluice_<debian version>_amd64.deb.
DIST ?= dist
# Packages with concurrency run under the race detector.
RACE_PKGS := ./protocol/... ./fleet/... ./cache/... ./rules/... ./auth/... ./router/... ./shard/... ./health/... ./server/... ./dataplane/... ./admin/... ./observe/... ./policy/... ./internal/... ./sandbox/...
# How much `make fuzz` fuzzes each target, and at most how much it spends
# shrinking one new input (the default 60s would eat a short run). Budgets
# are execution counts (Nx), not durations: with a duration, Go 1.26's fuzz
# coordinator can fail a target with a bare "context deadline exceeded" as
# the time runs out (go.dev/issue/75804, fixed in Go 1.27). The planner's
# GTID and admin-parser targets run slower, so FUZZ_SLOW_PKGS get FUZZTIME_SLOW.
# Each budget is about 10 s on a 2-core machine.
FUZZTIME ?= 150000x
FUZZ_PKGS ?= ./protocol ./health ./shard ./admin ./router ./auth/grants
FUZZ_SLOW_PKGS ?= ./health ./shard ./admin
FUZZTIME_SLOW ?= 50000x
FUZZMINIMIZETIME ?= 2000x
# `make microbench`: which benchmarks (a -bench pattern), and how long each runs.
MICROBENCH ?= .
MICROBENCHTIME ?= 200ms
# `make soak`: how long the measured soak runs (a Go duration), and go test's
# -timeout for it (the run adds a warm-up of up to 1m, settling and setup;
# see tests/soak). make test runs it for SOAK_CI.
SOAK ?= 30m
SOAK_TIMEOUT ?= 60m
SOAK_CI ?= 60s
# `make chaos`: how many iterations the failover chaos loop runs, its seed
# (empty: from the clock; every run logs the seed it used) and go test's
# -timeout for it. make test runs it for CHAOS_CI iterations.
CHAOS_ITERATIONS ?= 20
CHAOS_SEED ?=
CHAOS_TIMEOUT ?= 60m
CHAOS_CI ?= 3
# `make bench`: seconds per sysbench run; BENCH_QUICK=1 runs only point_select
# at 16 threads; BENCH_ROUNDS=3 runs each cell three times per target and
# reports the median run; SAVE=1 writes bench/results/<date>.md. A full run
# adds the scale cells (1,000 and 2,000 threads) and the login storm;
# BENCH_SCALE=1, BENCH_RULES=1 or BENCH_STORM=1 (given on the command line, like the other
# BENCH_* settings) runs only that phase (see bench/README.md).
BENCH_TIME ?= 10
BENCH_QUICK ?=
BENCH_ROUNDS ?= 1
SAVE ?=

# `make image`: the example configuration the image installs as
# /etc/sluice/sluice.toml, and the image's creation time (the commit's, so
# that the same commit gives the same image digest).
IMAGE_CONFIG ?= deploy/sluice.toml
IMAGE_CREATED ?= $(shell git log -1 --format=%cI 2>/dev/null)

.PHONY: all build run test unit fuzz e2e soak vet fmt deps deps-test clean microbench bench failover-drill chaos image test-image test-rules package test-deb

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/sluice
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/sluice-agent ./cmd/sluice-agent

# The Debian package: static binaries with the version stamped, the example
# configuration as /etc/sluice/sluice.toml, the systemd units; built by
# deploy/deb with nfpm. Prints the package's path.
package:
	@mkdir -p $(DIST)/bin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(DIST)/bin/sluice ./cmd/sluice
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(DIST)/bin/sluice-agent ./cmd/sluice-agent
	$(GO) run ./deploy/deb -version '$(VERSION)' -commit '$(COMMIT)' -count '$(COMMIT_COUNT)' -epoch '$(COMMIT_EPOCH)' -bin $(DIST)/bin -out $(DIST)

# Builds the package, installs it with dpkg, verifies the units with
# systemd-analyze, serves a sandbox topology with the installed binary and
# purges it (deploy/deb/package_test.go). It needs root and dpkg and fails
# without them; SLUICE_SKIP_DEB=1 (in the environment) skips it there
# instead. A package an earlier, killed run left installed is purged first.
# Not part of ./tests/...: it changes the machine's installed packages.
test-deb:
	$(GO) test -count=1 -timeout 15m -v ./deploy/deb

deps:
	bash scripts/deps.sh server

deps-test:
	bash scripts/deps.sh test

# A local sandbox topology (master, 2 replicas, auth server) with sluice in front;
# ARGS are sandbox flags (make run ARGS="-listen 127.0.0.1:7033 -metrics-listen 127.0.0.1:7070").
run: deps build
	./$(BIN) sandbox $(ARGS)

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

unit:
	$(GO) test -count=1 ./conf/... ./cmd/...
	$(GO) test -race -count=1 $(RACE_PKGS)

# Fuzz every Fuzz* target of FUZZ_PKGS for FUZZTIME (FUZZTIME_SLOW) each. (Plain `go test`
# already replays the committed corpora in <pkg>/testdata/fuzz.)
fuzz:
	@failed=""; \
	for p in $(FUZZ_PKGS); do \
		targets="$$($(GO) test -list '^Fuzz' $$p | grep '^Fuzz')"; \
		test -n "$$targets" || { echo "no fuzz targets found in $$p"; exit 1; }; \
		ft='$(FUZZTIME)'; \
		case " $(FUZZ_SLOW_PKGS) " in *" $$p "*) ft='$(FUZZTIME_SLOW)';; esac; \
		for t in $$targets; do \
			echo "== $$p $$t ($$ft)"; \
			$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $$ft -fuzzminimizetime $(FUZZMINIMIZETIME) $$p || failed="$$failed $$p.$$t"; \
		done; \
	done; \
	test -z "$$failed" || { echo "fuzzing failed:$$failed"; exit 1; }

# Go microbenchmarks of the per-statement hot path (classify, plan, read a
# command, relay a result, decode an execute, a whole command through a
# Session) with allocation counts. Quick and network-free; allocs/op is the
# number to watch, ns/op is only as quiet as the machine.
microbench:
	$(GO) test -run '^$$' -bench '$(MICROBENCH)' -benchmem -count 1 -benchtime $(MICROBENCHTIME) ./protocol ./router ./shard ./dataplane ./policy ./observe

# The end-to-end suite runs twice: sessions on goroutines (the default) and
# on event loops ([proxy] event_loop, through the sandbox's configurations).
# The second run keeps the result cache's consistency soak and binlog rounds
# short: they measure the cache, which is the same on both.
e2e:
	$(GO) test -race -count=1 -timeout 20m ./tests/...
	SLUICE_SANDBOX_PROXY_KEYS='event_loop = true' SLUICE_CACHE_SOAK=15s SLUICE_CACHE_BINLOG_ROUNDS=20 \
		$(GO) test -race -count=1 -timeout 20m ./tests/...

test: deps-test vet test-rules unit fuzz e2e test-image test-deb
	$(MAKE) soak SOAK=$(SOAK_CI) SOAK_TIMEOUT=15m
	$(MAKE) chaos CHAOS_ITERATIONS=$(CHAOS_CI) CHAOS_TIMEOUT=15m

# The Prometheus alert rules: promtool (Debian's prometheus package, which
# deps-test installs) checks deploy/prometheus-rules.yml and fires each alert
# from the made-up series of deploy/prometheus-rules.test.yml. That the rules
# name only metrics, labels and label values sluice exports is
# TestAlertRulesUseExportedMetrics (server), run by unit.
test-rules:
	promtool check rules deploy/prometheus-rules.yml
	promtool test rules deploy/prometheus-rules.test.yml

# The OCI image of sluice, built without a container daemon (deploy/image,
# go-containerregistry): a static binary stamped like build's on an empty
# base, as an OCI layout in dist/oci and a tarball `podman load` and
# `docker load` read (see docs/operations.md).
image:
	mkdir -p $(DIST)/image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(DIST)/image/sluice ./cmd/sluice
	$(GO) run ./deploy/image -binary $(DIST)/image/sluice -config $(IMAGE_CONFIG) -version '$(VERSION)' -revision '$(COMMIT)' \
		-created '$(IMAGE_CREATED)' -layout $(DIST)/oci -archive $(DIST)/sluice_$(VERSION)_image.tar

# The image's tests: its config and files, a reproducible digest, the
# image loaded into podman (Debian's, with runc) and run in front of a
# sandbox topology, and `make image` itself run into a temporary DIST, its
# archive loaded and inspected (TestMakeImage). Uses a podman storage of
# its own and removes it.
test-image:
	$(GO) test -count=1 -timeout 15m ./deploy/image

# The soak: sluice as a process of its own in front of a sandbox topology;
# workers connect, log in, query and disconnect as fast as they can while 8
# long-lived connections keep a mixed read/write load, for SOAK after a
# warm-up. Fails unless sluice's goroutines, open descriptors and RSS are
# back within 10% of the post-warm-up baseline once the clients are gone,
# no client saw an error and sluice logged no warning (slow queries aside);
# a 30m run must also complete 100,000 cycles. Prints a summary table
# (lines after "soak summary").
soak:
	SOAK='$(SOAK)' $(GO) test -count=1 -timeout $(SOAK_TIMEOUT) -run '^TestSoak$$' -v ./tests/soak

# sluice against direct MariaDB and HAProxy in TCP mode, with sysbench
# (installs haproxy and sysbench when missing).
bench:
	bash scripts/deps.sh bench
	BENCH_TIME='$(BENCH_TIME)' BENCH_QUICK='$(BENCH_QUICK)' BENCH_ROUNDS='$(BENCH_ROUNDS)' SAVE='$(SAVE)' $(GO) run ./bench

# The failover drill: 8 clients write to the master of a semi-synchronous
# sandbox, the master gets kill -9, a 500ms x 3 prober declares it down and
# the failover sequence promotes a replica. Prints (lines "drill:") detection
# time, promotion time and time to the first acknowledged write on the new
# master, and fails if an acknowledged write is missing there. For now the
# writers talk to the servers directly; sluice is not in the path yet.
failover-drill:
	$(GO) test -count=1 -run '^TestFailoverThroughSluice$$' -v ./tests

# The failover chaos loop: CHAOS_ITERATIONS iterations, each a
# semi-synchronous sandbox (2 or 3 replicas, at random) with sluice, built
# with -tags failpoint, as a process of its own in front of it and 4
# transactional writers through it; random replica degradations (IO or SQL
# thread stopped, MASTER_DELAY) and random kill -9 of the master, of a replica
# and of sluice (at a failover step through SLUICE_FAILPOINT, or at a random
# moment; it is restarted). Fails when an acknowledged transaction is lost,
# two servers are ever writable at once, or a replica does not converge on the
# master. Prints a line per iteration (lines "chaos:") with its seed;
# CHAOS_SEED=<seed> CHAOS_ITERATIONS=1 replays one (the faults, not their
# exact timing). See tests/chaos.
chaos:
	SLUICE_CHAOS_ITERATIONS='$(CHAOS_ITERATIONS)' SLUICE_CHAOS_SEED='$(CHAOS_SEED)' $(GO) test -count=1 -timeout $(CHAOS_TIMEOUT) -run '^TestChaos$$' -v ./tests/chaos

clean:
	rm -rf bin $(DIST)
