#!/usr/bin/env bash
# `make demo-reset`: puts the demo tenant of a running `make run` back as
# `make run` made it: the sample library's records (Grace's three loans), the requests
# as they were, the lock settings from the environment again (the tenant's
# settings entry goes), and the demo accounts with their demo passwords.
# The accounts are made again, so every page signed in to the demo is
# signed out ("Your session has ended: sign in again"). The script returns
# once circulation answers the environment's lock settings (its settings
# cache, SETTINGS_CACHE_TTL, holds the old ones for up to 3 s).
#
# What a watcher of the events sees: every open loan is first checked in
# through circulation, as a librarian's desk would, so each loan closed is
# announced (the loan UPDATED to Closed, its item's status, a CHECKED_IN).
# The tenant is then purged, which announces nothing (a purge deletes a
# tenant's records, it does not change them one by one), and the sample
# library loaded again, which announces each of its records as CREATED
# (the items, Grace's loans, Bob's requests) under the ids they had.
set -euo pipefail
cd "$(dirname "$0")/.."
STORAGE_ADDR="${STORAGE_ADDR:-127.0.0.1:8081}"
CIRCULATION_ADDR="${CIRCULATION_ADDR:-127.0.0.1:8080}"
TENANT="${TENANT:-diku}"
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
storage_url=$(url_of "$STORAGE_ADDR")
circulation_url=$(url_of "$CIRCULATION_ADDR")
# The service point the check-ins are made at: Circ Desk 2, the demo's.
service_point=c4c90014-c8c9-4ade-8f24-b5e313319f4b
if [ ! -s .run/tokens.env ]; then
  echo "demo-reset: no .run/tokens.env: start the demo with make run first" >&2
  exit 1
fi
# shellcheck source=/dev/null
. .run/tokens.env
for pair in "circulation-storage $storage_url STORAGE_ADDR" "circulation $circulation_url CIRCULATION_ADDR"; do
  read -r name url var <<<"$pair"
  if ! curl -fsS -o /dev/null "$url/admin/ready" 2>/dev/null; then
    echo "demo-reset: $name does not answer at $url: is make run running ($var)?" >&2
    exit 1
  fi
done
hdr=(-H "X-Okapi-Tenant: $TENANT" -H "X-Okapi-Token: $ADMIN_TOKEN" -H 'Content-Type: application/json')
echo "demo-reset: tenant $TENANT at $storage_url"

# metric is the value of one of storage's metrics (a series without
# labels), 0 when it has none yet.
metric() {
  curl -fsS "$storage_url/metrics" | awk -v m="$1" '$1 == m { v = $2 } END { print v + 0 }'
}
# wait_published waits until the relay has published every event of the
# database and, with a count, that many since published_before, for at
# most twenty seconds; it says whether it saw that. The backlog is what
# the leading relay last counted (it counts once a second at most, and
# waits up to OUTBOX_POLL, 1 s, for events when it has none), so a
# backlog of 0 read right after a commit can be from before it: the
# backlog must read 0, and the count published stay the same, for three
# seconds on end, longer than the relay can go without counting or
# publishing what is committed.
wait_published() {
  local since="" last=""
  for _ in $(seq 1 200); do
    local p d
    p=$(metric checkout_outbox_published_total)
    d=$(metric checkout_outbox_depth)
    if awk -v p="$p" -v d="$d" -v w="${1:-0}" 'BEGIN { exit !(p >= w && d == 0) }' && [ "$p" = "$last" ]; then
      if [ $(($(date +%s%3N) - since)) -ge 3000 ]; then
        return 0
      fi
    else
      since=$(date +%s%3N) last=$p
    fi
    sleep 0.1
  done
  return 1
}
# What was waiting before the reset is published first, so that the count
# below is of the check-ins' events alone.
wait_published || true
published_before=$(metric checkout_outbox_published_total)

# The open loans' items, by barcode, then each checked in. A loan opened
# meanwhile is found by the next round.
closed=0
for _ in 1 2 3; do
  items=$(curl -fsS "${hdr[@]}" "$storage_url/loan-storage/loans?status=Open&limit=1000" |
    grep -o '"itemId" *: *"[0-9a-f-]\{36\}"' | grep -o '[0-9a-f-]\{36\}' || true)
  [ -z "$items" ] && break
  for item in $items; do
    barcode=$(curl -fsS "${hdr[@]}" "$storage_url/item-storage/items/$item" | grep -o '"barcode" *: *"[^"]*"' | head -1 | sed 's/.*: *"\(.*\)"/\1/')
    code=$(curl -sS -o /dev/null -w '%{http_code}' "${hdr[@]}" -X POST "$circulation_url/circulation/check-in-by-barcode" \
      -d '{"itemBarcode":"'"$barcode"'","servicePointId":"'"$service_point"'"}')
    if [ "$code" != 200 ]; then
      echo "demo-reset: checking in $barcode answered $code" >&2
      exit 1
    fi
    closed=$((closed + 1))
  done
done
echo "demo-reset: checked in $closed open loan(s); each is announced as events (the loan closed, its item's status, the check-in)"
# A purge takes the tenant's events not yet published with it: wait until
# the relay has published the check-ins' (three at least each) and has
# nothing left, for at most twenty seconds.
if ! wait_published $((published_before + 3 * closed)); then
  echo "demo-reset: the check-ins' events are not all published after 20 s (is the broker up? see storage's log); a watcher may miss them" >&2
fi

scripts/demo-tenant.sh -reset "$storage_url" "$TENANT" "$ADMIN_TOKEN" >/dev/null
echo "demo-reset: purged the tenant (a purge announces nothing) and loaded the sample library again (each record announced as CREATED)"
# Done when circulation answers the environment's settings, every field's
# source "environment": a page or a check-out right after sees them.
for _ in $(seq 1 100); do
  if ! curl -fsS "${hdr[@]}" "$circulation_url/circulation/settings/check-out-lock" | grep -Eq ':[[:space:]]*"settings"'; then
    break
  fi
  sleep 0.1
done
echo "demo-reset: done: sample library, loans, requests, settings and demo accounts as make run made them"
echo "demo-reset: the accounts were made again: pages signed in to the demo are signed out; sign in again"
