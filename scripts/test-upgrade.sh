#!/usr/bin/env bash
# make test-upgrade: builds the previous release (the commit
# scripts/previous-release names, from this clone's history) and this
# tree, then runs the upgrade proofs against both on a PostgreSQL of the
# run's own: the previous release under check-out and check-in load,
# upgraded as an operator would, not one call failed
# (TestRollingUpgradeFromThePreviousRelease); and a storage ahead of its
# database's schema saying the upgrade it needs
# (TestAStorageAheadOfItsSchemaSaysTheUpgrade).
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"
prev="$(grep -v '^#' scripts/previous-release | head -n 1 | tr -d '[:space:]')"
if ! git cat-file -e "$prev^{commit}" 2>/dev/null && [ "$(git rev-parse --is-shallow-repository)" = true ]; then
  git fetch --quiet --unshallow 2>/dev/null || true
fi
if ! git cat-file -e "$prev^{commit}" 2>/dev/null; then
  if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
    # A shallow clone that cannot fetch its history holds no earlier
    # release to upgrade from: said, not hidden.
    echo "== make test-upgrade NOT RUN: this clone is shallow and the previous release $prev is not in it (git fetch --unshallow, then make test-upgrade)" >&2
    exit 0
  fi
  echo "test-upgrade: the previous release $prev (scripts/previous-release) is not a commit of this repository" >&2
  exit 1
fi
work="$(mktemp -d -t checkout-lock-upgrade-XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/src"
git archive "$prev" | tar -x -C "$work/src"
echo "== building the previous release ($(git log -1 --format='%h %cs' "$prev"))"
(cd "$work/src" && "$GO" run ./integration-tests/harness/cmd/buildbins "$work/previous")
echo "== building this tree"
"$GO" run ./integration-tests/harness/cmd/buildbins "$work/this"
PREVIOUS_RELEASE_BIN_DIR="$work/previous" CHECKOUT_LOCK_BIN_DIR="$work/this" \
  scripts/test-postgres.sh run "$GO" test -count=1 -timeout 10m -v \
  -run '^(TestRollingUpgradeFromThePreviousRelease|TestAStorageAheadOfItsSchemaSaysTheUpgrade)$' ./integration-tests/
