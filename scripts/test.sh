#!/usr/bin/env bash
# The whole suite, on SQLite and on PostgreSQL (required in CI, elsewhere when reachable).
# Called by `make test` after the virtual environment is in place.
#
# The two passes run at the same time (most of a pass is waiting: Celery workers, servers,
# chromium, subprocesses), each in its own process with its own test database, var folder
# (QAJ_VAR_DIR: filesystem broker, artifacts, caches), Redis key prefix, RabbitMQ queues and
# port-0 servers. Each pass writes its output to test-artifacts/test-<db>.log, printed whole
# when the pass ends; the exit status fails if either pass fails.
# QAJ_TEST_SEQUENTIAL=1 runs them one after the other, printing as they go.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export PYTHONUNBUFFERED=1
mkdir -p var test-artifacts

# Browser tests drive Debian's chromium; CI installs it, developers get the same step.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  # root installs directly; another user through passwordless sudo when it is there.
  as_root=""
  [ "$(id -u)" = 0 ] || { sudo -n true 2>/dev/null && as_root="sudo -n"; }
  if [ "$(id -u)" = 0 ] || [ -n "$as_root" ]; then
    echo "installing chromium with apt-get ..."
    $as_root apt-get update -qq && \
      $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi
if ! command -v chromium >/dev/null 2>&1 && [ "${CI:-}" = "true" ]; then
  echo "chromium is missing and could not be installed: browser tests cannot run" >&2
  exit 1
fi

echo "=== lint (ruff) ==="
.venv/bin/ruff check .

echo "=== architecture contracts (import-linter, .importlinter) ==="
.venv/bin/lint-imports

echo "=== no private names across modules (scripts/check_private_imports.py) ==="
$PY scripts/check_private_imports.py

run_id="$$"
status=0
root="$(pwd)"
sqlite_db="var/test-${run_id}.sqlite3"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  rm -rf "$sqlite_db" "var/test-${run_id}-sqlite" "var/test-${run_id}-postgresql"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PG_URL="${QAJ_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
run_postgres=0
if $PY - "$PG_URL" <<'PYEOF' 2>/dev/null
import sys, psycopg2
psycopg2.connect(sys.argv[1], connect_timeout=3).close()
PYEOF
then
  run_postgres=1
elif [ "${CI:-}" = "true" ]; then
  echo "PostgreSQL at $PG_URL is not reachable; CI requires the PostgreSQL pass" >&2
  exit 1
fi

# One pass, run in a subshell: it becomes the pytest process (exec), so a signal reaches pytest.
pass() {
  local db="$1"; shift
  local var_dir="$root/var/test-${run_id}-${db}"
  mkdir -p "$var_dir"
  if [ "$db" = sqlite ]; then
    QAJ_VAR_DIR="$var_dir" QAJ_TEST_DB_NAME="$sqlite_db" \
      DATABASE_URL="sqlite:///var/qajudge-test.sqlite3" exec $PY -m pytest "$@"
  else
    QAJ_VAR_DIR="$var_dir" QAJ_TEST_DB_NAME="test_qajudge_${run_id}" \
      QAJ_SCREENSHOT_DIR="$root/test-artifacts/screenshots/postgresql" \
      DATABASE_URL="$PG_URL" exec $PY -m pytest "$@"
  fi
}

dbs=(sqlite)
[ "$run_postgres" = 1 ] && dbs+=(postgresql)
declare -A title=([sqlite]=SQLite [postgresql]=PostgreSQL)

if [ "${QAJ_TEST_SEQUENTIAL:-}" = 1 ]; then
  for db in "${dbs[@]}"; do
    echo "=== test suite on ${title[$db]} ==="
    (pass "$db" "$@") || status=$?
  done
else
  echo "=== test suite on ${dbs[*]}, concurrently (logs: test-artifacts/test-<db>.log) ==="
  start=$SECONDS
  declare -A pid_of
  for db in "${dbs[@]}"; do
    pass "$db" "$@" > "test-artifacts/test-${db}.log" 2>&1 &
    pid_of[$db]=$!
    pids+=("$!")
  done
  for db in "${dbs[@]}"; do
    pass_status=0
    wait "${pid_of[$db]}" || pass_status=$?
    echo "=== test suite on ${title[$db]}: exit ${pass_status} after $((SECONDS - start)) s ==="
    cat "test-artifacts/test-${db}.log"
    [ "$pass_status" = 0 ] || status=$pass_status
  done
  pids=()
fi

if [ "$run_postgres" = 0 ]; then
  echo "=== PostgreSQL not reachable at $PG_URL: PostgreSQL pass not run (required in CI) ==="
fi
exit $status
