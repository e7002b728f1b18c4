"""Measure the secret and injection screens: recall, false positives, cost.

    .venv/bin/python scripts/safety_screen_eval.py [--turns FILE.json ...]

Reports, over the corpora in tests/support (secret_corpus, injection_corpus):

- the secret screen's recall on credentials in sentences (refused, and no byte of the
  secret left after scrubbing), its false positives on look-alikes and on code snippets;
- the same for detect-secrets 1.5.0 with its default plugins and filters, when it is
  installed (it is not a dependency: ``pip install detect-secrets==1.5.0`` to compare),
  and for the union of both;
- the injection screen's recall and false positives;
- the cost: microseconds per KB of text and per typical 200-byte turn. ``--turns`` adds
  LoCoMo or LongMemEval JSON files (their turn texts are timed and screened, and the
  number flagged is printed; nothing is copied).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.injection_corpus import BENIGN, INJECTIONS
from tests.support.secret_corpus import CODE, LOOKALIKES, SECRETS

from quipu.safety import find_secrets, looks_like_injection, scrub_secrets


def _detect_secrets() -> Callable[[str], bool] | None:
    try:
        from detect_secrets import SecretsCollection
        from detect_secrets.settings import default_settings
    except ImportError:
        return None

    def flags(text: str) -> bool:
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as handle:
            handle.write(text)
            name = handle.name
        try:
            with default_settings():
                found = SecretsCollection()
                found.scan_file(name)
                return any(True for _ in found)
        finally:
            os.unlink(name)

    return flags


def _row(name: str, caught: int, total: int, fp_lookalike: int, fp_code: int) -> str:
    return (
        f"| {name} | {caught}/{total} ({caught / total:.1%}) | {fp_lookalike}/{len(LOOKALIKES)}"
        f" | {fp_code}/{len(CODE)} |"
    )


def secret_table() -> None:
    own_hits = [bool(find_secrets(c.text)) for c in SECRETS]
    own_clean = [c.secret not in scrub_secrets(c.text)[0] for c in SECRETS]
    own_caught = sum(h and s for h, s in zip(own_hits, own_clean, strict=True))
    own_fp_l = [bool(find_secrets(t)) for t in LOOKALIKES]
    own_fp_c = [bool(find_secrets(t)) for t in CODE]
    print(
        f"secret corpus: {len(SECRETS)} credentials, {len(LOOKALIKES)} look-alikes, "
        f"{len(CODE)} code snippets\n"
    )
    print("| screen | credentials refused | look-alikes refused | code refused |")
    print("|---|---|---|---|")
    print(_row("quipu", own_caught, len(SECRETS), sum(own_fp_l), sum(own_fp_c)))
    ds = _detect_secrets()
    if ds is None:
        print("\n(detect-secrets not installed: pip install detect-secrets==1.5.0 to compare)")
        return
    ds_hits = [ds(c.text) for c in SECRETS]
    ds_fp_l = [ds(t) for t in LOOKALIKES]
    ds_fp_c = [ds(t) for t in CODE]
    print(_row("detect-secrets 1.5.0", sum(ds_hits), len(SECRETS), sum(ds_fp_l), sum(ds_fp_c)))
    union = sum((a and b) or d for a, b, d in zip(own_hits, own_clean, ds_hits, strict=True))
    print(
        _row(
            "quipu + detect-secrets",
            union,
            len(SECRETS),
            sum(a or b for a, b in zip(own_fp_l, ds_fp_l, strict=True)),
            sum(a or b for a, b in zip(own_fp_c, ds_fp_c, strict=True)),
        )
    )
    missed = [c.label for c, h in zip(SECRETS, ds_hits, strict=True) if not h]
    print(f"\ndetect-secrets misses ({len(missed)}): {', '.join(missed)}")
    extra = [c.label for c, a, d in zip(SECRETS, own_hits, ds_hits, strict=True) if d and not a]
    print(f"caught by detect-secrets only: {extra or 'none'}")


def injection_table() -> None:
    caught = sum(looks_like_injection(t) for t in INJECTIONS)
    flagged = sum(looks_like_injection(t) for t in BENIGN)
    print(
        f"\ninjection corpus: {caught}/{len(INJECTIONS)} attempts flagged, "
        f"{flagged}/{len(BENIGN)} benign memories flagged"
    )


def _cost(texts: list[str], screen: Callable[[str], object], rounds: int = 3) -> float:
    """Best-of-``rounds`` microseconds per text."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for text in texts:
            screen(text)
        best = min(best, time.perf_counter() - start)
    return best / len(texts) * 1e6


def timing(extra: Iterable[str]) -> None:
    typical = [
        "I moved the standup to 9:30 because the Berlin team starts later now, and Ana "
        "will run it on Fridays. Remind me to update the calendar invite and the wiki.",
        "We decided to keep Postgres for billing; the migration to the new schema ships "
        "next sprint after the index rebuild. Ping Marco about the read replica lag.",
    ] * 200
    sample = typical[0]
    kb = [t * 6 for t in typical[:50]]  # ~1 KB each
    print(f"\ncost (best of 3, this machine), typical turn = {len(sample)} characters:")
    for name, screen in (
        ("find_secrets", find_secrets),
        ("looks_like_injection", looks_like_injection),
    ):
        per_turn = _cost(typical, screen)
        per_kb = _cost(kb, screen) / (len(kb[0]) / 1024)
        print(f"- {name}: {per_turn:.0f} us per turn, {per_kb:.0f} us per KB")
    for path in extra:
        texts = _turn_texts(Path(path))
        size_kb = sum(len(t) for t in texts) / 1024
        start = time.perf_counter()
        secrets = sum(bool(find_secrets(t)) for t in texts)
        mid = time.perf_counter()
        injections = sum(looks_like_injection(t) for t in texts)
        end = time.perf_counter()
        print(
            f"- {Path(path).name}: {len(texts)} turns, {size_kb:.0f} KB; find_secrets "
            f"{(mid - start) / size_kb * 1e6:.0f} us/KB, flagged {secrets}; "
            f"looks_like_injection {(end - mid) / size_kb * 1e6:.0f} us/KB, flagged {injections}"
        )


def _turn_texts(path: Path) -> list[str]:
    """Turn texts of a LoCoMo (``text``) or LongMemEval (``content``) file."""
    found: list[str] = []
    stack: list[object] = [json.loads(path.read_text())]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in ("text", "content"):
                if isinstance(item.get(key), str):
                    found.append(item[key])
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend(item)
    return list(dict.fromkeys(found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", nargs="*", default=[], help="LoCoMo/LongMemEval JSON files")
    args = parser.parse_args()
    secret_table()
    injection_table()
    timing(args.turns)


if __name__ == "__main__":
    main()
