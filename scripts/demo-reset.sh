#!/usr/bin/env bash
# `make demo-reset`: puts the demo tenant of a running `make run` back as
# `make run` made it: the sample library's records, no loans but the
# sample's, the requests as they were, the lock settings from the
# environment again (the tenant's settings entry goes), and the demo
# accounts with their demo passwords. circulation applies the settings
# within its settings cache period (SETTINGS_CACHE_TTL, 3 s).
set -euo pipefail
cd "$(dirname "$0")/.."
STORAGE_ADDR="${STORAGE_ADDR:-127.0.0.1:8081}"
TENANT="${TENANT:-diku}"
host="${STORAGE_ADDR%:*}" port="${STORAGE_ADDR##*:}"
case "$host" in ""|0.0.0.0|"[::]") host=127.0.0.1 ;; esac
storage_url="http://$host:$port"
if [ ! -s .run/tokens.env ]; then
  echo "demo-reset: no .run/tokens.env: start the demo with make run first" >&2
  exit 1
fi
# shellcheck source=/dev/null
. .run/tokens.env
if ! curl -fsS -o /dev/null "$storage_url/admin/ready" 2>/dev/null; then
  echo "demo-reset: circulation-storage does not answer at $storage_url: is make run running (STORAGE_ADDR)?" >&2
  exit 1
fi
echo "demo-reset: tenant $TENANT at $storage_url"
scripts/demo-tenant.sh -reset "$storage_url" "$TENANT" "$ADMIN_TOKEN" >/dev/null
echo "demo-reset: done: sample library, loans, requests, settings and demo accounts as make run made them"
