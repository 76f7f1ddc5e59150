#!/usr/bin/env bash
# `make run`: the product on this machine with no other step. Ensures
# PostgreSQL is up, creates the database if missing, starts the services,
# initialises tenant diku, and stays in the foreground until Ctrl-C, which
# stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."

# Where the services listen: loopback only unless told otherwise.
STORAGE_ADDR="${STORAGE_ADDR:-127.0.0.1:8081}"
CIRCULATION_ADDR="${CIRCULATION_ADDR:-127.0.0.1:8080}"
# The SIP2 door: kiosks' plain TCP on loopback (SIP2_ADDR), its health and
# metrics on SIP2_ADMIN_ADDR.
SIP2_ADDR="${SIP2_ADDR:-127.0.0.1:6443}"
SIP2_ADMIN_ADDR="${SIP2_ADMIN_ADDR:-127.0.0.1:8082}"
# The message broker the domain events go to (NATS with JetStream, the
# release nats/go.mod pins, built by make build), its store in NATS_STORE.
NATS_ADDR="${NATS_ADDR:-127.0.0.1:4223}"
NATS_STORE="${NATS_STORE:-.run/nats}"
# The demo's mailbox: the SMTP server the patron notices are sent to
# (mailpit, the release mailpit/go.mod pins, built by make build), its web
# page and API on MAILBOX_ADDR, its store in MAILBOX_STORE.
MAILBOX_ADDR="${MAILBOX_ADDR:-127.0.0.1:8025}"
MAILBOX_SMTP_ADDR="${MAILBOX_SMTP_ADDR:-127.0.0.1:1025}"
MAILBOX_STORE="${MAILBOX_STORE:-.run/mailbox.db}"
TENANT="${TENANT:-diku}"
# The binaries make build made (the tests point this at their own build).
BIN_DIR="${BIN_DIR:-bin}"

# shellcheck source=scripts/lib.sh
. scripts/lib.sh
storage_url=$(url_of "$STORAGE_ADDR")
circulation_url=$(url_of "$CIRCULATION_ADDR")
sip2_admin_url=$(url_of "$SIP2_ADMIN_ADDR")
sip2_hostport=$(url_of "$SIP2_ADDR"); sip2_hostport="${sip2_hostport#http://}"

# A port already taken means another copy (or another program) would answer
# in our place: stop here, before anything starts, and say how to move.
nats_url="nats://$NATS_ADDR"
mailbox_url=$(url_of "$MAILBOX_ADDR")
for pair in "STORAGE_ADDR $storage_url" "CIRCULATION_ADDR $circulation_url" "SIP2_ADDR http://$sip2_hostport" "SIP2_ADMIN_ADDR $sip2_admin_url" "NATS_ADDR http://$NATS_ADDR" \
  "MAILBOX_ADDR $mailbox_url" "MAILBOX_SMTP_ADDR http://$MAILBOX_SMTP_ADDR"; do
  var="${pair%% *}" url="${pair#* }"
  hostport="${url#http://}"
  if (exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}") 2>/dev/null; then
    echo "run: ${hostport} ($var) is already in use, by another make run or another program." >&2
    echo "run: stop it, or choose other ports, e.g. STORAGE_ADDR=127.0.0.1:9081 CIRCULATION_ADDR=127.0.0.1:9080 SIP2_ADDR=127.0.0.1:7443 SIP2_ADMIN_ADDR=127.0.0.1:9082 NATS_ADDR=127.0.0.1:5223 MAILBOX_ADDR=127.0.0.1:9025 MAILBOX_SMTP_ADDR=127.0.0.1:2025 make run" >&2
    exit 1
  fi
done

admin=$(scripts/ensure-postgres.sh)
if [ -z "${DATABASE_URL:-}" ]; then
  # The same server as the maintenance database, database "circulation".
  base="${admin%%\?*}"
  query=""
  [ "$base" != "$admin" ] && query="?${admin#*\?}"
  export DATABASE_URL="${base%/*}/circulation${query}"
fi
db="${DATABASE_URL%%\?*}"
db="${db##*/}"
if [ -z "$(psql "$admin" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'")" ]; then
  echo "run: creating database $db"
  psql "$admin" -qc "CREATE DATABASE \"$db\""
fi

# Authentication: jwt mode with a development secret kept in .run/ (made
# on first use), one token per role written to .run/tokens.env, and
# circulation's module key pair (with which it calls storage as itself),
# made on first use in .run/ too.
mkdir -p .run
if [ ! -s .run/jwt-secret ]; then
  (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > .run/jwt-secret)
fi
export AUTH_MODE="${AUTH_MODE:-jwt}"
if [ "$AUTH_MODE" = jwt ] && [ -z "${AUTH_JWT_SECRET:-}${AUTH_JWT_PUBLIC_KEY_FILE:-}${AUTH_JWKS_URL:-}" ]; then
  AUTH_JWT_SECRET="$(cat .run/jwt-secret)"
  export AUTH_JWT_SECRET
fi
"$BIN_DIR/devtoken" -secret-file .run/jwt-secret -tenant "$TENANT" -module-key .run/module-key.pem > .run/tokens.env
storage_auth=() circulation_auth=()
if [ "$AUTH_MODE" = jwt ]; then
  storage_auth=(AUTH_TRUSTED_MODULES="${AUTH_TRUSTED_MODULES:-circulation=$PWD/.run/module-key.pub.pem}")
  circulation_auth=(AUTH_MODULE_KEY_FILE="${AUTH_MODULE_KEY_FILE:-$PWD/.run/module-key.pem}")
fi
# The check-out lock feature is on here, as in the shipped config files:
# storage reads the variable (for a tenant that stored no setting of its
# own) and tells circulation.
export CHECKOUT_LOCK_FEATURE_ENABLED="${CHECKOUT_LOCK_FEATURE_ENABLED:-true}"
# Warnings only, so that the banner stays in view while the pages poll;
# LOG_LEVEL=info make run logs a line per request.
export LOG_LEVEL="${LOG_LEVEL:-warn}"
# shellcheck source=/dev/null
. .run/tokens.env


pids=()
nats_pid=""
mailbox_pid=""
stop() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  # The broker last: the relay stops publishing first.
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  [ -n "$nats_pid" ] && kill -TERM "$nats_pid" 2>/dev/null || true
  [ -n "$mailbox_pid" ] && kill -TERM "$mailbox_pid" 2>/dev/null || true
  wait 2>/dev/null || true
}
# Ctrl-C (or a TERM) is how make run is stopped: everything stopped, it
# ends well (0), so make says nothing more; any other end stops them too.
trap 'stop; exit 0' INT TERM
trap stop EXIT

# The broker first: storage's relay publishes to it as soon as it starts.
nats_server="$BIN_DIR/nats-server"
mkdir -p "$NATS_STORE"
"$nats_server" -js -a "${NATS_ADDR%:*}" -p "${NATS_ADDR##*:}" -sd "$NATS_STORE" >"$NATS_STORE.log" 2>&1 &
nats_pid=$!
for _ in $(seq 1 100); do
  if (exec 3<>"/dev/tcp/${NATS_ADDR%:*}/${NATS_ADDR##*:}") 2>/dev/null; then break; fi
  if ! kill -0 "$nats_pid" 2>/dev/null; then echo "run: nats-server exited; see $NATS_STORE.log" >&2; exit 1; fi
  sleep 0.1
done

# The mailbox next: a Message-ID it has delivered it drops, so a notice
# sent again after a stop reaches the patron once.
mkdir -p "$(dirname "$MAILBOX_STORE")"
"$BIN_DIR/mailpit" --smtp "$MAILBOX_SMTP_ADDR" --listen "$MAILBOX_ADDR" --database "$MAILBOX_STORE" --ignore-duplicate-ids \
  --disable-version-check >"$MAILBOX_STORE.log" 2>&1 &
mailbox_pid=$!
for _ in $(seq 1 100); do
  if curl -fsS -o /dev/null "$mailbox_url/api/v1/info" 2>/dev/null; then break; fi
  if ! kill -0 "$mailbox_pid" 2>/dev/null; then echo "run: mailpit exited; see $MAILBOX_STORE.log" >&2; exit 1; fi
  sleep 0.1
done

env "${storage_auth[@]}" HTTP_ADDR="$STORAGE_ADDR" NATS_URL="$nats_url" NOTICE_SMTP_ADDR="$MAILBOX_SMTP_ADDR" NOTICE_FROM=circulation@library.test \
  "$BIN_DIR/circulation-storage" &
pids+=($!)

wait_ready() { # url name pid
  for _ in $(seq 1 100); do
    if curl -fsS -o /dev/null "$1/admin/ready" 2>/dev/null; then return 0; fi
    if ! kill -0 "$3" 2>/dev/null; then echo "run: $2 exited; see its log above" >&2; exit 1; fi
    sleep 0.1
  done
  echo "run: $2 did not become ready at $1" >&2
  exit 1
}
wait_ready "$storage_url" circulation-storage "${pids[0]}"

echo "run: initialising tenant $TENANT"
demo_accounts=$(scripts/demo-tenant.sh "$storage_url" "$TENANT" "$ADMIN_TOKEN")

# The SIP2 door connects to circulation from 127.0.0.1 and names each
# kiosk's address, by which storage counts the kiosks' failed logins:
# circulation trusts it to.
env "${circulation_auth[@]}" HTTP_ADDR="$CIRCULATION_ADDR" STORAGE_URL="$storage_url" SIP2_ADMIN_URLS="$sip2_admin_url" \
  TRUSTED_PROXIES="${TRUSTED_PROXIES:-127.0.0.1}" "$BIN_DIR/circulation" &
pids+=($!)
wait_ready "$circulation_url" circulation "${pids[1]}"

# The SIP2 door's listener for the demo tenant: plain TCP on loopback, as
# the file says explicitly; check-outs at Circ Desk 2.
cat > .run/sip2.json <<JSON
{"listeners": [{"address": "$SIP2_ADDR", "tenant": "$TENANT", "servicePointId": "c4c90014-c8c9-4ade-8f24-b5e313319f4b",
  "plain": true, "timeZone": "UTC"}]}
JSON
HTTP_ADDR="$SIP2_ADMIN_ADDR" SIP2_CONFIG=.run/sip2.json CIRCULATION_URL="$circulation_url" "$BIN_DIR/sip2" &
pids+=($!)
wait_ready "$sip2_admin_url" sip2 "${pids[2]}"

cat <<MSG

  circulation          $circulation_url   (check-out lock feature on)
  circulation-storage  $storage_url   (tenant $TENANT, database $db, sample data loaded)
  SIP2 door            $sip2_hostport     (plain TCP; kiosk account: kiosk, kiosk-demo)
                       a session with it: scripts/sip2-session.sh $sip2_hostport
  NATS JetStream       $nats_url   (the domain events: check-outs, check-ins, loans, items, requests)
                       watch the demo tenant's: $BIN_DIR/events -nats $nats_url -tenant $TENANT
  Mailbox (mailpit)    $mailbox_url   (the patrons' notices, e.g. Bob's hold ready; SMTP $MAILBOX_SMTP_ADDR)

  Sign in on the pages with a demo account (name, password):
        $circulation_url/ui/loans.html?tenant=$TENANT       circulation desk: a patron's loans (librarian)
        $circulation_url/ui/settings.html?tenant=$TENANT    settings (librarian)
        $circulation_url/ui/locks.html?tenant=$TENANT       lock console (operator)
$demo_accounts

  The demo library's patrons, each showing a rule (README.md, "Try it"):
        1001  Alice Archer   undergraduate: at most 3 books, two weeks, renewable once
        1002  Bob Baker      book-020 waits for him on the hold shelf; he waits for book-151 and book-153
        1003  Carol Cole     inactive: refused
        1004  Dave Dunn      faculty: three weeks, renewable twice
        1005  Erin Ellis     blocked by hand (card reported stolen): refused
        1006  Frank Foster   registration expired: refused
        1007  Grace Green    at her limit: book-151, book-152, book-153 out, each renewable once
        DVDs: at most 2, for a week, not renewable; reading-01..10: reading room only

  Try it: README.md, "Try it". Tokens per role for API clients: .run/tokens.env
  Logs: warnings only (LOG_LEVEL=info make run logs a line per request)
  Put the demo back as it was: make demo-reset.  Stop: Ctrl-C (README: "Stop and clean up")

MSG
wait -n "${pids[@]}"
