#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers, and prints the URL of its
# maintenance database ("postgres") on stdout.
#
# The server is the one DATABASE_URL (or TEST_DATABASE_URL, or FOLIO's DB_*
# variables) points at, default 127.0.0.1:5432 as user postgres. If nothing
# answers there and this machine has a PostgreSQL cluster installed (Debian's
# postgresql package), it is started. Otherwise the script says what to do.
set -euo pipefail

url="${DATABASE_URL:-${TEST_DATABASE_URL:-}}"
if [ -z "$url" ]; then
  auth="${DB_USERNAME:-postgres}"
  [ -n "${DB_PASSWORD:-}" ] && auth="$auth:$DB_PASSWORD"
  url="postgres://$auth@${DB_HOST:-127.0.0.1}:${DB_PORT:-5432}/postgres"
  # On this machine's loopback, TLS would only cost CPU on both sides.
  case "${DB_HOST:-127.0.0.1}" in 127.0.0.1|localhost|::1) url="$url?sslmode=disable" ;; esac
fi
# The same server's maintenance database: swap the path, keep the query.
base="${url%%\?*}"
query=""
[ "$base" != "$url" ] && query="?${url#*\?}"
admin="${base%/*}/postgres${query}"

if pg_isready -q -d "$admin" -t 2 2>/dev/null; then
  echo "$admin"
  exit 0
fi

if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ] && [ -n "$(ls /etc/postgresql 2>/dev/null)" ]; then
  for version in $(ls /etc/postgresql); do
    echo "ensure-postgres: starting PostgreSQL $version cluster 'main'" >&2
    pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 || true
  done
  for _ in $(seq 1 60); do
    if pg_isready -q -d "$admin" -t 1 2>/dev/null; then
      echo "$admin"
      exit 0
    fi
    sleep 0.5
  done
fi

cat >&2 <<MSG
ensure-postgres: no PostgreSQL answers at ${admin%%@*}@${admin#*@}
  and no local cluster could be started. Either
  - point DATABASE_URL at a PostgreSQL 15+ server you can create databases on, e.g.
      export DATABASE_URL=postgres://postgres:secret@db.example:5432/circulation
  - or install one: sudo apt-get install postgresql && sudo pg_ctlcluster 15 main start
MSG
exit 1
