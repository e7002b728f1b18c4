#!/usr/bin/env bash
# Run a command and fail if it changed what `git status` shows (make test must leave the
# checkout as it found it: tests write to temporary folders, never to tracked files).
set -uo pipefail
cd "$(dirname "$0")/.."
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  exec "$@"  # not a git checkout: nothing to compare
fi
before="$(git status --porcelain)"
"$@"
code=$?
after="$(git status --porcelain)"
if [[ "$before" != "$after" ]]; then
  echo "the run changed the checkout (tests must write to temporary folders):" >&2
  diff <(echo "$before") <(echo "$after") >&2
  [[ $code -eq 0 ]] && code=1
fi
exit $code
