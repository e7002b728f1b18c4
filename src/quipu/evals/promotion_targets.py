"""Issue 24's targets read off one public-dialogue promotion report (`quipu eval promotion
--longmemeval/--locomo`): for each promotion arm (``old``: facts only, the extractor's first
rules; ``new`` and ``inline``: episodes plus the current rules), every target's figure from the
same run beside its goal and whether it is met, so old and new sit side by side.

- ``answer_session_top5``: any@5 over what promotion wrote, at least the raw turns' any@5 in
  this run (the issue's 93 % vs 58 %);
- ``storage_vs_raw``: characters written over the raw arm's, at most 1.5;
- ``fact_from_evidence:<type>``: a fact came from an evidence turn, at least 0.5 for
  single-session-user, preference and knowledge-update questions (LongMemEval), and over all
  questions (LoCoMo has no such types);
- ``knowledge_update``: the newer value current and the old superseded, at least 0.7 where
  the user stated both;
- ``promote_ms_per_session``: the median, at most 50 ms;
- ``faithful_facts``: judged by hand on the arm's ``fact_sample`` (at least 0.85 faithful, at
  most 0.04 distorted or wrongly stored): no figure here, ``met`` is None.

A figure the run could not produce (no such questions) has ``value`` and ``met`` None.
"""

from __future__ import annotations

from typing import Any

#: Goals of issue 24 (fractions, a ratio, milliseconds).
STORAGE_GOAL = 1.5
EVIDENCE_GOAL = 0.5
UPDATE_GOAL = 0.7
PROMOTE_MS_GOAL = 50.0
FAITHFUL_GOAL = 0.85
DISTORTED_GOAL = 0.04
FACT_TYPES = ("single-session-user", "single-session-preference", "knowledge-update")


def _row(value: float | None, goal: float | None, at_least: bool) -> dict[str, Any]:
    met = None
    if value is not None and goal is not None:
        met = value >= goal if at_least else value <= goal
    return {"value": value, "goal": goal, "at_least": at_least, "met": met}


def targets(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{arm: {target: {value, goal, at_least, met}}}`` for every arm but ``raw``."""
    arms: dict[str, Any] = report["arms"]
    raw = arms.get("raw")
    raw_any = None if raw is None else raw["by_group"].get("all", {}).get("any@5")
    raw_chars = None if raw is None else raw["chars"]
    out: dict[str, dict[str, Any]] = {}
    for arm, entry in arms.items():
        if arm == "raw":
            continue
        groups: dict[str, Any] = entry["by_group"]
        rows: dict[str, Any] = {
            "answer_session_top5": _row(groups.get("all", {}).get("any@5"), raw_any, True),
            "storage_vs_raw": _row(
                round(entry["chars"] / raw_chars, 3) if raw_chars else None, STORAGE_GOAL, False
            ),
        }
        typed = [t for t in FACT_TYPES if t in groups]
        for group in typed or ["all"]:
            rows[f"fact_from_evidence:{group}"] = _row(
                groups[group].get("fact_from_evidence") if group in groups else None,
                EVIDENCE_GOAL,
                True,
            )
        updates = [g for g in groups.values() if "newer_current_and_old_superseded" in g]
        update = groups.get("knowledge-update") or groups.get("all") or {}
        rows["knowledge_update"] = _row(
            update.get("newer_current_and_old_superseded") if updates else None,
            UPDATE_GOAL,
            True,
        )
        rows["promote_ms_per_session"] = _row(
            entry.get("promote_ms_per_session", {}).get("median"), PROMOTE_MS_GOAL, False
        )
        rows["faithful_facts"] = {
            "value": None,
            "goal": {"faithful": FAITHFUL_GOAL, "distorted_or_wrong": DISTORTED_GOAL},
            "at_least": True,
            "met": None,
            "judge": f"by hand, on arms.{arm}.fact_sample",
        }
        out[arm] = rows
    return out
