# Two commands for a newcomer: `make run` starts the product against the local
# PostgreSQL, `make test` runs every test. Both set themselves up.

SHELL     := /bin/bash
GO        ?= go
# Every build leaves its directory out of what it makes, so that go's cache
# (which otherwise keys on the directory) serves one clone's builds to
# another: a fresh clone's make test compiles only what changed.
export GOFLAGS += -trimpath
MODULES   := circulation-storage circulation sip2 schemas serverkit migrations config integration-tests
GO_PKGS   := $(foreach m,$(MODULES),./$(m)/...)
UNIT_PKGS := $(filter-out ./integration-tests/...,$(GO_PKGS))
# How long one package's tests may take in make test before it is failed
# as hung: a few times what they take on two cores (the slowest unit
# package about 90 s, the workloads across real processes about two
# minutes).
UNIT_TIMEOUT        ?= 5m
INTEGRATION_TIMEOUT ?= 15m
BENCH_OUT ?= bench-results
# The revision make bench compares this version's check-out with (scenario
# 6): the one before check-outs made four calls to storage.
BENCH_BASELINE ?= 86c6f12
# BENCH_ONLY=lock-cycle runs scenario 1 alone, in a few minutes; BENCH_ONLY=burst
# scenario 3 (a patron's bursts) alone, in under a minute; BENCH_ONLY=before-after
# scenario 6 (this version's check-out against BENCH_BASELINE's) alone;
# BENCH_ONLY=outbox scenario 9 (check-outs with the outbox and without, and the
# events' delivery lag) alone, in about five minutes; BENCH_ONLY=sip2 scenario 8 (a kiosk's check-outs through the SIP2 door
# against HTTP, and its bursts) alone, in about a minute;
# BENCH_ONLY=tenants scenario 7 (BENCH_TENANTS tenants, spread traffic
# against one tenant's) alone; BENCH_ONLY=busy scenario 10 (one busy
# tenant, its statistics taken while empty against after ANALYZE, 10^3 and
# 10^5 open loans) alone, in about two minutes; BENCH_ONLY=flood scenario 11
# (wrong passwords from 10,000 addresses against the owner's sign-ins, and
# the counts left after the window) alone, in about a minute;
# BENCH_ONLY=recovery scenario 13 (check-outs in a closed loop at c = 1 and 8
# while storage's PostgreSQL backends are terminated ten times: the time from
# each termination to the next check-out that succeeds) alone, in about a minute;
# BENCH_ONLY=checkout-floor scenario 14 (the check-out through circulation and
# storage against a minimal net/http + pgx server sending its very statements,
# alternating, at c = 1, 8 and 32) alone, in about two minutes;
# BENCH_ONLY=checkout-probe scenario 14's probe (the service and the floor
# split in two, one slice each at c = 1 and 8: each process's CPU and thread
# switches, PostgreSQL's CPU, statements and sessions) alone, under a minute;
# BENCH_ONLY=tracing scenario 15 (this version's check-out with every
# check-out traced, its spans sent to a sink of the bench's own, against the
# same untraced, alternating, at c = 1 and 4: CPU per check-out by party and
# the traced/untraced ratios) alone, in about two minutes (BENCH_ROUNDS and
# BENCH_SLICE shape it too; 0: forty rounds of 500 ms).
BENCH_ONLY ?=
# BENCH_TENANTS is how many tenants scenario 7 (BENCH_ONLY=tenants alone)
# initialises.
BENCH_TENANTS ?= 2000
# BENCH_TENANTS_STEADY=10m keeps scenario 7's spread check-outs going that
# long afterwards, sampling PostgreSQL's memory; BENCH_TENANTS_LIFETIME sets
# storage's DB_MAX_CONN_LIFETIME for it (0: the default).
BENCH_TENANTS_STEADY ?= 0s
BENCH_TENANTS_LIFETIME ?= 0s
# BENCH_ROUNDS=n gives scenario 6 (and 15) n rounds of BENCH_SLICE each version
# (0: its three of three seconds), for a difference of a few per cent.
BENCH_ROUNDS ?= 0
BENCH_SLICE ?= 2s
# BENCH_TRACING=true has scenario 6 trace this version's check-outs
# (exported to a collector of the bench's own), against the baseline's.
BENCH_TRACING ?= false
# BENCH_FLOOR_TOUCH=n has scenario 14's split floor asked once (and its
# probe's) allocate and write n KiB of memory before and after each
# check-out: a control for what a process's memory does to PostgreSQL's
# statements, not the yardstick (0: none).
BENCH_FLOOR_TOUCH ?= 0
# BENCH_PROFILE=true has the services and the check-out floor serve Go's
# profiles (PROFILE_ADDR on a free loopback port) and scenario 14's probe
# save a CPU profile of each process of both sides for each slice, and a
# second's execution trace after it, in BENCH_OUT (go tool pprof -top
# BENCH_OUT/checkout-probe-c1-storage.pprof; go tool trace
# BENCH_OUT/checkout-probe-c1-storage.trace).
BENCH_PROFILE ?= false
# BENCH_LOG_LEVEL=info logs every request of the benchmarked services (with
# KEEP_LOGS=<dir> to keep the logs); it slows them.
BENCH_LOG_LEVEL ?= warn
STATICCHECK := v0.8.2
FUZZTIME  ?= 10m
# make test fuzzes for a number of inputs, not a time: a time limit races go
# test's fuzzing coordinator, which can fail a run that found nothing.
FUZZ_INPUTS ?= 100000x

# MUTATE_FLAGS are make mutate's flags: -fresh, -only <name>, -j <n>.
MUTATE_FLAGS ?=
# HISTORY is how long make test-long's history checker records operations:
# three minutes, in which some sixty faults fall, each of the five kinds a
# dozen times (HISTORY=10m make test-long for a longer one).
HISTORY ?= 3m

.PHONY: all help build descriptors run demo-reset test test-long test-upgrade test-ha mutate rules screenshots fuzz bench soak lint fmt clean

all: build

## help: list the targets, what each does
help:
	@sed -n 's/^## \([a-z-]*\): \(.*\)/\1\t\2/p' $(MAKEFILE_LIST) | awk -F'\t' '{printf "  make %-12s %s\n", $$1, $$2}'

## build: compile the services, the NATS server nats/go.mod pins and the SMTP server mailpit/go.mod pins, into bin/
build:
	@mkdir -p bin
	$(GO) build -o bin/circulation-storage ./circulation-storage/cmd/circulation-storage
	$(GO) build -o bin/circulation ./circulation/cmd/circulation
	$(GO) build -o bin/sip2 ./sip2/cmd/sip2
	$(GO) build -o bin/events ./circulation-storage/cmd/events
	$(GO) build -o bin/devtoken ./serverkit/cmd/devtoken
	cd nats && GOWORK=off $(GO) build -o ../bin/nats-server github.com/nats-io/nats-server/v2
	cd mailpit && GOWORK=off $(GO) build -o ../bin/mailpit github.com/axllent/mailpit

## descriptors: write the module descriptors, the OpenAPI descriptions and the permission table from the route table in package schemas
descriptors:
	$(GO) run ./schemas/cmd/descriptors

## run: start PostgreSQL if needed, create the database, start the services with tenant diku
run: build
	scripts/run.sh

## demo-reset: put the demo tenant of a running make run back as make run made it (loans, requests, settings, accounts)
demo-reset:
	scripts/demo-reset.sh

## test: the habit: the lint, the alerting rules, the unit packages, then the short suite of the workloads across real processes (race detector on), on a PostgreSQL of the run's own (TEST_DATABASE_URL=... to use another) and binaries built once; about five and a half minutes on two cores (331 s from a clean clone with Go's caches warm, nothing else running)
test: rules
	GO=$(GO) UNIT_PKGS="$(UNIT_PKGS)" UNIT_TIMEOUT=$(UNIT_TIMEOUT) INTEGRATION_TIMEOUT=$(INTEGRATION_TIMEOUT) scripts/test.sh short

## test-long: what make test leaves out: the parsers' fuzzing, the benchmarks' smoke run, and the workloads that pass at a person's pace or time real timeouts, with the history checker recording HISTORY (three minutes) of operations under faults
test-long:
	GO=$(GO) INTEGRATION_TIMEOUT=$(INTEGRATION_TIMEOUT) FUZZ_INPUTS=$(FUZZ_INPUTS) HISTORY=$(HISTORY) scripts/test.sh long

## test-upgrade: the upgrade proofs: the previous release (the commit scripts/previous-release names) under check-out and check-in load, upgraded to this tree as an operator would (new storage, the tenant upgraded, circulation instances one by one) with not one call failed, and a storage ahead of its schema saying the upgrade it needs; some 15 s with Go's caches warm, a few minutes more to build both releases when they are cold
test-upgrade:
	GO=$(GO) scripts/test-upgrade.sh

## test-ha: the failover proofs, each on a three-node Patroni cluster of its own, at once (installs patroni and etcd-server when missing), about three minutes
test-ha:
	scripts/ensure-postgres.sh >/dev/null
	$(GO) test -count=1 -timeout 30m -v -run 'TestFailover' ./integration-tests/ha -args -ha

## mutate: the mutation checks: each guarantee listed in <module>/mutations.txt broken through go -overlay (the working tree untouched), one per CPU side by side, its tests must fail; a mutation killed before by exactly what it is made of now (mutations-killed.txt) is not run again (MUTATE_FLAGS=-fresh runs every one: fifteen to twenty-five minutes on two cores)
mutate:
	scripts/test-postgres.sh run $(GO) run ./integration-tests/mutate $(MUTATE_FLAGS)

## rules: check the shipped Prometheus alerting rules with promtool (installed from Debian's prometheus package when missing)
rules:
	$$(scripts/ensure-package.sh promtool prometheus) check rules config/monitoring/checkout-lock-alerts.yml
	cd config/monitoring && $$(../../scripts/ensure-package.sh promtool prometheus) test rules checkout-lock-alerts.test.yml

## screenshots: run the browser tests and save pictures of the pages into docs/screenshots, with the digests of the pages they are of (make test fails when the pages change and the pictures do not)
screenshots: build
	scripts/ensure-postgres.sh >/dev/null
	$(GO) test -count=1 -run 'InABrowser|TestTheDesk|TestReadmeAndWalkthrough' ./integration-tests/ -args -screenshots=$(abspath docs/screenshots)
	cd circulation/internal/httpapi/ui && sha256sum * > $(abspath docs/screenshots/pages.sha256)

## fuzz: fuzz the CQL parser for longer (ten minutes; FUZZTIME=1h make fuzz)
fuzz:
	cd circulation-storage && $(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./cql

## bench: the benchmarks against real processes, about fifteen minutes; table on stdout, results.json and charts in bench-results/ (BENCH_OUT=dir elsewhere)
bench: build
	scripts/ensure-postgres.sh >/dev/null
	$(GO) test -count=1 -timeout 60m -v -run TestBenchmarks ./integration-tests/bench -args -bench.out=$(abspath $(BENCH_OUT)) -bench.baseline=$(BENCH_BASELINE) -bench.only=$(BENCH_ONLY) -bench.tenants=$(BENCH_TENANTS) -bench.tenants.steady=$(BENCH_TENANTS_STEADY) -bench.tenants.lifetime=$(BENCH_TENANTS_LIFETIME) -bench.loglevel=$(BENCH_LOG_LEVEL) -bench.rounds=$(BENCH_ROUNDS) -bench.slice=$(BENCH_SLICE) -bench.tracing=$(BENCH_TRACING) -bench.floor.touch=$(BENCH_FLOOR_TOUCH) -bench.profile=$(BENCH_PROFILE)

## soak: the workloads across real processes, five times larger, three times over
soak: build
	scripts/ensure-postgres.sh >/dev/null
	$(GO) test -count=3 -timeout 30m -v ./integration-tests/ -args -soak

## lint: gofmt, go vet and staticcheck must be clean, and every module tidy on its own with the versions it shares agreeing
lint:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(GO_PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK) $(GO_PKGS)
	scripts/check-modules.sh

## fmt: format the code
fmt:
	gofmt -w $(MODULES)

## clean: remove the built binaries (bin/); make run's state is in .run/ and the database circulation (README, Stop and clean up)
clean:
	rm -rf bin
