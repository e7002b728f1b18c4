#!/usr/bin/env bash
# Run a command with QUIPU_TEST_DATABASE_URL set to a throwaway PostgreSQL + pgvector server
# (scripts/testdb.py) and stop that server however the command ends. docs/testing-postgres.md
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${TESTDB_PYTHON:-$root/.venv/bin/python}"
dir="${TESTDB_DIR:-$root/.testdb}"
trap '"$py" "$root/scripts/testdb.py" stop --dir "$dir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
url="$("$py" "$root/scripts/testdb.py" start --dir "$dir")"
QUIPU_TEST_DATABASE_URL="$url" "$@"
