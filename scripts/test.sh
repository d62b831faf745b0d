#!/usr/bin/env bash
# The whole suite, on SQLite and again on PostgreSQL (required in CI, elsewhere when reachable).
# Called by `make test` after the virtual environment is in place.
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

run_id="$$"
status=0

echo "=== test suite on SQLite ==="
QAJ_TEST_DB_NAME="var/test-${run_id}.sqlite3" DATABASE_URL="sqlite:///var/qajudge-test.sqlite3" \
  $PY -m pytest "$@" || status=$?
rm -f "var/test-${run_id}.sqlite3"

PG_URL="${QAJ_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
if $PY - "$PG_URL" <<'PYEOF' 2>/dev/null
import sys, psycopg2
psycopg2.connect(sys.argv[1], connect_timeout=3).close()
PYEOF
then
  echo "=== test suite on PostgreSQL ==="
  QAJ_TEST_DB_NAME="test_qajudge_${run_id}" DATABASE_URL="$PG_URL" $PY -m pytest "$@" || status=$?
elif [ "${CI:-}" = "true" ]; then
  echo "PostgreSQL at $PG_URL is not reachable; CI requires the PostgreSQL pass" >&2
  exit 1
else
  echo "=== PostgreSQL not reachable at $PG_URL: PostgreSQL pass not run (required in CI) ==="
fi
exit $status
