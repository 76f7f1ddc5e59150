#!/usr/bin/env bash
# The body of make test and make test-long: the tests on PostgreSQL
# servers of the run's own and on binaries built once, each phase timed.
#
#   scripts/test.sh short   # make test: the lint, the unit packages, then
#                           # the short suite of the workloads across real
#                           # processes
#   scripts/test.sh long    # make test-long: the parsers' fuzzing and the
#                           # benchmarks' smoke run, then the long suite of
#                           # the workloads (integration-tests/main_test.go's
#                           # longTests: a person's pace, real timeouts timed,
#                           # the history checker at length)
#
# Each line (a part run beside the others, with its log) has a PostgreSQL
# of its own (scripts/test-postgres.sh), so that what one measures of its
# server (MultiXacts made, plans, backends' memory) is its own;
# TEST_DATABASE_URL names one server for all of them instead. The five
# binaries the workloads run are built once into the run's directory and
# named to every test package by CHECKOUT_LOCK_BIN_DIR. The run's
# directory, and its servers, go when the run ends, however it ends.
#
# Most of what the tests do is wait on PostgreSQL and on processes, so
# each package runs several tests at a time (TEST_PARALLEL, default 4), and
# go test several packages at a time (TEST_PACKAGES, default 2, the
# longest first), not one per core; no more, so that on two shared cores
# having a slow day the tests that time a real wait still get their turn.
#
# Variables set by the Makefile, their one home: GO, UNIT_PKGS,
# UNIT_TIMEOUT, INTEGRATION_TIMEOUT, FUZZ_INPUTS, HISTORY; and
# WORKLOADS_PARALLEL (default 3: on two shared cores, eight at a time
# starved the tests that time a real wait on a slow day, and four did on
# a slower one: storage's reads outlasted STORAGE_TIMEOUT).
set -euo pipefail
cd "$(dirname "$0")/.."

suite="${1:?usage: scripts/test.sh short|long}"
GO="${GO:-go}"
parallel="${TEST_PARALLEL:-4}"
packages="${TEST_PACKAGES:-2}"
# The lines that use a PostgreSQL, each a server of its own.
case "$suite" in
  short) lines=(unit workloads) ;;
  long) lines=(fuzz_and_smoke workloads) ;;
  *) echo "usage: scripts/test.sh short|long" >&2; exit 2 ;;
esac
run_dir="$(mktemp -d -t checkout-lock-test-XXXXXX)"
cleanup() {
  for line in "${lines[@]}"; do
    if [ -d "$run_dir/pg-$line" ]; then scripts/test-postgres.sh stop "$run_dir/pg-$line"; fi
  done
  rm -rf "$run_dir"
}
trap cleanup EXIT

phase_start=$SECONDS
phase() {
  echo "== $1 ($((SECONDS - phase_start)) s into the run)"
}

declare -A server
if [ -n "${TEST_DATABASE_URL:-}" ]; then
  for line in "${lines[@]}"; do server[$line]="$TEST_DATABASE_URL"; done
else
  phase "starting the run's PostgreSQL servers"
  # One after another: each takes the first free port from 55432.
  for line in "${lines[@]}"; do
    server[$line]="$(scripts/test-postgres.sh start "$run_dir/pg-$line")"
  done
fi
for line in "${lines[@]}"; do echo "PostgreSQL of $line: ${server[$line]}"; done

phase "building the binaries once"
export CHECKOUT_LOCK_BIN_DIR="$run_dir/bin"
"$GO" run ./integration-tests/harness/cmd/buildbins "$CHECKOUT_LOCK_BIN_DIR"

unit() {
  # With them the integration tests' harness and the contract's checks,
  # which take no suite.
  # shellcheck disable=SC2086 # UNIT_PKGS is a list
  "$GO" test -race -count=1 -p "$packages" -parallel "$parallel" -timeout "${UNIT_TIMEOUT:?set by the Makefile}" \
    ./circulation-storage/internal/lending/ ${UNIT_PKGS:?} ./integration-tests/contract/ ./integration-tests/harness/
}
workloads() {
  if [ "$suite" = short ]; then
    "$GO" test -race -count=1 -parallel "${WORKLOADS_PARALLEL:-3}" -timeout "${INTEGRATION_TIMEOUT:?set by the Makefile}" -v \
      ./integration-tests/ -args -suite=short
  else
    # The tests timed against the lock's retry budget and real timeouts are
    # not parallel: they run alone, the rest two at a time.
    "$GO" test -race -count=1 -parallel 2 -timeout "${INTEGRATION_TIMEOUT:?set by the Makefile}" -v \
      ./integration-tests/ -args -suite=long -history="${HISTORY:?set by the Makefile}"
  fi
}
lint() {
  make --no-print-directory lint
}
fuzz_and_smoke() {
  (cd circulation-storage && "$GO" test -run '^$' -fuzz '^FuzzParse$' -fuzztime "${FUZZ_INPUTS:?set by the Makefile}" ./cql)
  (cd sip2 && "$GO" test -run '^$' -fuzz '^FuzzParse$' -fuzztime "${FUZZ_INPUTS:?set by the Makefile}" ./wire)
  "$GO" test -count=1 -timeout 5m -v -run TestBenchmarks ./integration-tests/bench -args -bench.smoke -bench.baseline=HEAD
}

# run_lines runs the lines named at once, each with its server and its
# log, and prints each log as its line ends; it fails if any line failed.
run_lines() {
  local line status
  local -A pids
  for line in "$@"; do
    (
      status=0
      TEST_DATABASE_URL="${server[$line]:-}" "$line" >"$run_dir/$line.log" 2>&1 || status=$?
      echo "$((SECONDS - phase_start))" >"$run_dir/$line.ended"
      exit "$status"
    ) &
    pids[$line]=$!
  done
  local failed=()
  for line in "$@"; do
    if wait "${pids[$line]}"; then status=passed; else status=FAILED; failed+=("$line"); fi
    echo "== $line $status (it ended $(cat "$run_dir/$line.ended") s into the run); its log:"
    cat "$run_dir/$line.log"
  done
  if [ "${#failed[@]}" -gt 0 ]; then
    echo "== FAILED: ${failed[*]} (the logs above)"
    return 1
  fi
}

status=0
if [ "$suite" = short ]; then
  # One after another, each alone: the lint (cold, after a change to much
  # of the code, it takes both cores for a minute or two), the unit
  # packages (some count guesses against a real wait), then the workloads.
  phase "the lint"
  run_lines lint || status=1
  phase "the unit packages"
  run_lines unit || status=1
else
  # Fuzzing and the benchmarks' smoke run take both cores: before the
  # workloads, which time bursts against the lock's retry budget.
  phase "fuzzing and the benchmarks' smoke run"
  run_lines fuzz_and_smoke || status=1
fi
phase "the workloads across real processes ($suite suite)"
run_lines workloads || status=1
if [ "$status" != 0 ]; then
  phase "FAILED: the lines above that say so"
  exit 1
fi
phase "all passed ($suite suite)"
