#!/usr/bin/env bash
# `make mutate`: cosmic-ray mutation runs over the safety-critical modules, each against the
# tests that guard it (docs/development.md). Slow by design (every mutant reruns its tests), so
# it is not part of `make test`. Each module's survivors are printed at the end; a survivor is
# either killed by a new test or explained as equivalent in the closing note of the change.
#
# MUTATE_ONLY=holds bash scripts/mutate.sh runs one entry of the table below.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-.venv/bin/python}"
bin="$(dirname "$py")"
out="${MUTATE_OUT:-.mutate}"
mkdir -p "$out"

# name | module | the tests that guard it (SQLite only: the logic is the same on every backend)
table=(
  "holds|src/quipu/governance/holds.py|tests/unit/test_holds_covering.py tests/contract/test_hold_matrix.py -k 'not postgres and not citus'"
  "scopes|src/quipu/core/scopes.py|tests/unit/test_scope_rules.py tests/unit/test_core.py tests/contract/test_memory_contract.py -k 'not postgres and not citus'"
  "erasure|src/quipu/governance/erasure.py|tests/contract/test_governance_erase_contract.py tests/contract/test_hold_matrix.py tests/contract/test_erase_subject_planes.py -k 'sqlite or use_case'"
  "secrets|src/quipu/safety/secrets.py|tests/unit/test_safety_secrets.py tests/unit/test_safety_secret_corpus.py tests/unit/test_safety_fields.py"
  "injection|src/quipu/safety/injection.py|tests/unit/test_safety_injection.py tests/unit/test_safety_injection_corpus.py"
)

for row in "${table[@]}"; do
  IFS='|' read -r name module tests <<<"$row"
  if [[ -n "${MUTATE_ONLY:-}" && "$MUTATE_ONLY" != "$name" ]]; then
    continue
  fi
  config="$out/$name.toml"
  session="$out/$name.sqlite"
  cat >"$config" <<TOML
[cosmic-ray]
module-path = "$module"
timeout = 300.0
excluded-modules = []
test-command = "$py -m pytest -x -q -p no:cacheprovider -p no:randomly $tests"

[cosmic-ray.distributor]
name = "local"

# '|' in these modules is the union of type annotations, which never run (from __future__
# import annotations): its mutants are equivalent by construction.
[cosmic-ray.filters.operators-filter]
exclude-operators = ["core/ReplaceBinaryOperator_BitOr_.*"]
TOML
  rm -f "$session"
  echo "== $name: $module"
  "$bin/cosmic-ray" init "$config" "$session"
  "$bin/cr-filter-operators" "$session" "$config"
  "$bin/cosmic-ray" baseline "$config" >/dev/null || { echo "$name: the tests fail unmutated"; exit 1; }
  "$bin/cosmic-ray" exec "$config" "$session"
  echo "-- $name survivors:"
  "$bin/cr-report" "$session" --surviving-only --show-diff
  "$bin/cr-report" "$session" | tail -n 3
done
