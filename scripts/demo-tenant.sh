#!/usr/bin/env bash
# Sets up the demo tenant at a running circulation-storage, as `make run`
# does: initialises it with FOLIO's reference data and the sample library,
# and makes the demo accounts, one per role, each with the password
# <name>-demo and the id devtoken's token for its role names
# (<ROLE>_USER_ID, from .run/tokens.env), so that whoever acts with a token
# of make run's is named on the pages (an account that exists keeps its id
# and gets its demo password again). With -reset it first purges the tenant: its loans,
# requests, settings and accounts go, and come back as `make run` made them.
#
#   scripts/demo-tenant.sh [-reset] STORAGE_URL TENANT ADMIN_TOKEN
#
# It prints the demo accounts, one line each.
set -euo pipefail
reset=false
if [ "${1:-}" = -reset ]; then reset=true; shift; fi
storage_url="$1" tenant="$2" token="$3"
hdr=(-H "X-Okapi-Tenant: $tenant" -H "X-Okapi-Token: $token" -H 'Content-Type: application/json')

if $reset; then
  curl -fsS -o /dev/null -X POST "$storage_url/_/tenant" "${hdr[@]}" \
    -d '{"module_from":"mod-circulation-storage-1.0.0","purge":true}'
fi
# Enabling the tenant is idempotent (its loaders change nothing the second
# time): on a busy machine, where loading the sample data can outlast
# REQUEST_TIMEOUT (503, rolled back), it is asked again.
curl -fsS -o /dev/null --retry 3 --retry-delay 1 -X POST "$storage_url/_/tenant" "${hdr[@]}" \
  -d '{"module_to":"mod-circulation-storage-1.0.0","parameters":[{"key":"loadReference","value":"true"},{"key":"loadSample","value":"true"}]}'

for a in "kiosk:self-check:Self-check:Kiosk:${SELF_CHECK_USER_ID:-}" "librarian:librarian:Lee:Librarian:${LIBRARIAN_USER_ID:-}" \
  "operator:operator:Olga:Operator:${OPERATOR_USER_ID:-}" "admin:tenant-admin:Ada:Admin:${ADMIN_USER_ID:-}"; do
  IFS=: read -r user role first last id <<<"$a"
  # 201, or 422 when the account is there already: either will do.
  curl -sS -o /dev/null -X POST "$storage_url/sign-in-accounts" "${hdr[@]}" \
    -d '{'"${id:+\"id\":\"$id\",}"'"username":"'"$user"'","personal":{"firstName":"'"$first"'","lastName":"'"$last"'"},"roles":["circulation.role.'"$role"'"]}'
  curl -fsS -o /dev/null -X POST "$storage_url/authn/credentials" "${hdr[@]}" \
    -d '{"username":"'"$user"'","password":"'"$user"'-demo"}'
  printf '        %-10s %-16s %s\n' "$user" "$user-demo" "($first $last, $role)"
done
# Dave (1004) types his PIN at the kiosk: a kiosk shows a patron their
# name and loans with it (SIP2's AD), the verdict alone without it.
dave=$(curl -fsS "$storage_url/users?query=barcode==1004" "${hdr[@]}" | grep -o '"id" *: *"[0-9a-f-]\{36\}"' | head -1 | grep -o '[0-9a-f-]\{36\}')
curl -fsS -o /dev/null -X POST "$storage_url/patron-pin" "${hdr[@]}" -d '{"id":"'"$dave"'","pin":"4711"}'
printf '        %-10s %-16s %s\n' "1004" "PIN 4711" "(Dave Dunn, a patron, at the kiosk)"
