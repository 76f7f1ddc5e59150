#!/usr/bin/env bash
# What a NOTIFY in a write's own transaction would cost the writes: pgbench
# runs a transaction that inserts a row and commits, and the same with a
# pg_notify before the commit, each at 1 and 8 clients, in turns, on the
# server make bench uses (scripts/ensure-postgres.sh), in a database of its
# own that it drops after. PostgreSQL holds one lock over every notifying
# commit, its flush to disk included: why a write wakes the outbox relay
# after its commit, from a transaction of its own (docs/events.md).
#
#   scripts/notify-cost.sh [seconds per run, default 5]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-5}"
admin="$(scripts/ensure-postgres.sh)"
pgbench="$(ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | tail -1)"
[ -x "$pgbench" ] || pgbench="$(command -v pgbench)"
db="notify_cost_$$"
base="${admin%%\?*}"
query=""
[ "$base" != "$admin" ] && query="?${admin#*\?}"
url="${base%/*}/$db$query"
psql -q -d "$admin" -c "CREATE DATABASE $db"
dir="$(mktemp -d)"
trap 'psql -q -d "$admin" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"; rm -rf "$dir"' EXIT
psql -q -d "$url" -c "CREATE TABLE written (id bigserial PRIMARY KEY, v text)"
printf 'BEGIN;\nINSERT INTO written (v) VALUES ($$x$$);\nCOMMIT;\n' >"$dir/plain.sql"
printf 'BEGIN;\nINSERT INTO written (v) VALUES ($$x$$);\nSELECT pg_notify($$checkout_outbox_cost$$, $$$$);\nCOMMIT;\n' >"$dir/notify.sql"
echo "synchronous_commit=$(psql -tA -d "$url" -c 'SHOW synchronous_commit'), fsync=$(psql -tA -d "$url" -c 'SHOW fsync')"
for clients in 1 8; do
  for round in 1 2; do
    plain=$("$pgbench" -n -c "$clients" -j "$(( clients < 2 ? 1 : 2 ))" -T "$secs" -f "$dir/plain.sql" "$url" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    notify=$("$pgbench" -n -c "$clients" -j "$(( clients < 2 ? 1 : 2 ))" -T "$secs" -f "$dir/notify.sql" "$url" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    echo "clients $clients, round $round: commits/s without NOTIFY $plain, with $notify, with / without $(awk -v a="$notify" -v b="$plain" 'BEGIN { printf "%.2f", a / b }')"
  done
done
