#!/usr/bin/env bash
# make test's body: the tests on a PostgreSQL of the run's own and on
# binaries built once, each phase timed.
#
# A PostgreSQL is started for the run (scripts/test-postgres.sh) unless
# TEST_DATABASE_URL names one; the five binaries the workloads run are
# built once into the run's directory and named to every test package by
# CHECKOUT_LOCK_BIN_DIR. The run's directory, and its server, go when the
# run ends, however it ends.
#
# Variables (set by the Makefile): GO, UNIT_PKGS, UNIT_TIMEOUT,
# INTEGRATION_TIMEOUT, FUZZ_INPUTS.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
run_dir="$(mktemp -d -t checkout-lock-test-XXXXXX)"
own_server=""
cleanup() {
  if [ -n "$own_server" ]; then scripts/test-postgres.sh stop "$run_dir/pg"; fi
  rm -rf "$run_dir"
}
trap cleanup EXIT

phase_start=$SECONDS
phase() {
  echo "== $1 ($((SECONDS - phase_start)) s into the run)"
}

if [ -z "${TEST_DATABASE_URL:-}" ]; then
  phase "starting the run's PostgreSQL"
  own_server=1
  TEST_DATABASE_URL="$(scripts/test-postgres.sh start "$run_dir/pg")"
  export TEST_DATABASE_URL
fi
echo "PostgreSQL: $TEST_DATABASE_URL"

phase "building the binaries once"
export CHECKOUT_LOCK_BIN_DIR="$run_dir/bin"
"$GO" run ./integration-tests/harness/cmd/buildbins "$CHECKOUT_LOCK_BIN_DIR"

# Three lines at once, each with its log: the unit packages; the
# workloads across real processes; the parsers' fuzzing and then the
# benchmarks' smoke run. Most of what the tests do is wait on PostgreSQL
# and on processes, so each package runs many tests at a time
# (-parallel), not one per core.
parallel="${TEST_PARALLEL:-8}"
phase "unit tests, workloads, fuzzing and the benchmarks' smoke run, at once"
unit() {
  # shellcheck disable=SC2086 # UNIT_PKGS is a list
  "$GO" test -race -count=1 -parallel "$parallel" -timeout "${UNIT_TIMEOUT:-3m}" ${UNIT_PKGS:?}
}
workloads() {
  "$GO" test -race -count=1 -parallel "$parallel" -timeout "${INTEGRATION_TIMEOUT:-15m}" -v ./integration-tests/ ./integration-tests/contract/ ./integration-tests/harness/
}
fuzz_and_smoke() {
  (cd circulation-storage && "$GO" test -run '^$' -fuzz '^FuzzParse$' -fuzztime "${FUZZ_INPUTS:-400000x}" ./cql)
  (cd sip2 && "$GO" test -run '^$' -fuzz '^FuzzParse$' -fuzztime "${FUZZ_INPUTS:-400000x}" ./wire)
  "$GO" test -count=1 -timeout 5m -v -run TestBenchmarks ./integration-tests/bench -args -bench.smoke -bench.baseline=HEAD
}
declare -A pids
for line in unit workloads fuzz_and_smoke; do
  "$line" >"$run_dir/$line.log" 2>&1 &
  pids[$line]=$!
done
failed=()
for line in unit workloads fuzz_and_smoke; do
  if wait "${pids[$line]}"; then status=passed; else status=FAILED; failed+=("$line"); fi
  echo "== $line $status ($((SECONDS - phase_start)) s into the run); its log:"
  cat "$run_dir/$line.log"
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "== FAILED: ${failed[*]} (the logs above)"
  exit 1
fi
phase "done"
