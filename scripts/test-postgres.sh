#!/usr/bin/env bash
# Starts a PostgreSQL of the test run's own, tuned for tests, and prints
# the URL of its maintenance database on stdout.
#
#   scripts/test-postgres.sh start <dir>   # initdb into <dir>/data, start it
#   scripts/test-postgres.sh stop <dir>    # stop it (the caller removes <dir>)
#   scripts/test-postgres.sh run <command> [args...]
#       # runs the command with TEST_DATABASE_URL naming a server started
#       # for it, which goes, with its directory, when the command ends
#
# The server listens on 127.0.0.1 on the first free port from 55432, with
# trust authentication, and keeps nothing it would need after a crash:
# fsync, full page writes and synchronous commit are off (a crash loses the
# run, which is thrown away anyway). It allows 600 connections, enough for
# the unit packages and the integration tests to run in parallel. The
# tests that need a PostgreSQL with other settings (a server's connections
# exhausted, a failover) start their own.
#
# initdb refuses to run as root: as root, the server runs as the postgres
# user Debian's package creates.
set -euo pipefail

cmd="${1:?usage: test-postgres.sh start|stop <dir>, or run <command>}"
if [ "$cmd" = run ]; then
  shift
  [ $# -gt 0 ] || { echo "usage: test-postgres.sh run <command> [args...]" >&2; exit 2; }
  run_dir="$(mktemp -d -t checkout-lock-pg-XXXXXX)"
  trap '"$0" stop "$run_dir/pg"; rm -rf "$run_dir"' EXIT
  TEST_DATABASE_URL="$("$0" start "$run_dir/pg")"
  export TEST_DATABASE_URL
  status=0
  "$@" || status=$?
  exit "$status"
fi
dir="${2:?usage: test-postgres.sh start|stop <dir>}"

bin=""
for candidate in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
  if [ -x "$candidate/initdb" ]; then bin="$candidate"; break; fi
done
if [ -z "$bin" ]; then
  if command -v initdb >/dev/null 2>&1; then
    bin="$(dirname "$(command -v initdb)")"
  else
    echo "test-postgres: no initdb found; install PostgreSQL 15+ (sudo apt-get install postgresql)" >&2
    exit 1
  fi
fi

as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

case "$cmd" in
start)
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then
    # The postgres user must reach the directory through its parent (a
    # mktemp -d, private to root).
    chmod a+x "$(dirname "$dir")"
    chown postgres "$dir"
  fi
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  for port in $(seq 55432 55531); do
    if pg_isready -q -h 127.0.0.1 -p "$port" -t 1 2>/dev/null; then
      continue # someone else's
    fi
    if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start -o "\
 -c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='$dir'\
 -c max_connections=600 -c shared_buffers=256MB\
 -c fsync=off -c full_page_writes=off -c synchronous_commit=off\
 -c max_wal_size=4GB -c checkpoint_timeout=30min\
 -c max_locks_per_transaction=256 -c log_min_messages=warning" >/dev/null 2>&1; then
      echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
      exit 0
    fi
  done
  echo "test-postgres: could not start a server on any port from 55432 to 55531; its log:" >&2
  cat "$dir/server.log" >&2 || true
  exit 1
  ;;
stop)
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  ;;
*)
  echo "test-postgres: unknown command $cmd (start or stop)" >&2
  exit 2
  ;;
esac
