"""Secret detection and scrubbing (SAFE-1).

``find_secrets`` returns the credential-like spans of a text; write paths refuse such text
with ``secret_error``; extracted and promoted text goes through ``scrub_secrets`` instead.

Text is folded first (:func:`quipu.safety.normalize.fold`: NFKC, zero-width characters
dropped, look-alike letters mapped), so full-width or zero-width obfuscation does not hide a
key; spans are mapped back to the original text. Two families of rules run on it:

- token shapes (:mod:`quipu.safety.secret_rules`): a provider prefix, a length, a checksum
  (cards, IBANs) or a structure (PEM bodies, JWTs); they win over context rules;
- context rules (:mod:`quipu.safety.secret_context`): a value named by a key, a sentence or
  a command line, kept only when the value itself looks like a credential and not like
  code, a placeholder or prose (:mod:`quipu.safety.secret_values`).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from quipu.errors import SecretDetected
from quipu.safety.normalize import fold
from quipu.safety.secret_context import context_spans
from quipu.safety.secret_rules import token_spans

__all__ = ["SecretFinding", "find_secrets", "scrub_secrets", "secret_error"]


@dataclass(frozen=True)
class SecretFinding:
    """One credential-like span: ``text[start:end]`` in the original string."""

    kind: str
    start: int
    end: int


_PRIVATE_KEY = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PRIVATE_KEY_END = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PRIVATE_KEY_BODY = re.compile(r"(?:\s{0,4}(?:\\n)?[A-Za-z0-9+/=]{16,}+)*+")
_PRIVATE_KEY_MAX = 64_000
_RESCANS = 3


def _private_key_findings(text: str) -> list[SecretFinding]:
    """Each block up to its END line, or the header and body when the END is missing."""
    found: list[SecretFinding] = []
    ends: list[int] | None = None
    for match in _PRIVATE_KEY.finditer(text):
        if ends is None:
            ends = [m.end() for m in _PRIVATE_KEY_END.finditer(text)]
        i = bisect_right(ends, match.end())
        if i < len(ends) and ends[i] - match.start() <= _PRIVATE_KEY_MAX:
            found.append(SecretFinding("private_key", match.start(), ends[i]))
            continue
        body = _PRIVATE_KEY_BODY.match(text, match.end())
        end = min(body.end() if body else match.end(), match.end() + _PRIVATE_KEY_MAX)
        found.append(SecretFinding("private_key", match.start(), end))
    return found


def _specific_findings(text: str, lowered: str) -> list[SecretFinding]:
    found = _private_key_findings(text) if "private key" in lowered else []
    found += [SecretFinding(kind, s, e) for kind, s, e in token_spans(text, lowered)]
    return found


def _context_findings(text: str, lowered: str) -> list[SecretFinding]:
    return [SecretFinding(s.kind, s.start, s.end) for s in context_spans(text, lowered)]


def _merge(
    chosen: list[SecretFinding], candidates: list[SecretFinding], absorb: bool
) -> list[SecretFinding]:
    """Add candidates (earliest, then longest first) that overlap nothing already kept.

    With ``absorb`` (context rules), a candidate that strictly contains the findings it
    overlaps replaces them (``password=ab!sk-...`` is one password), and one that runs into
    a finding keeps its head up to that finding, so no part of the value stays visible.
    """
    if not candidates:
        return chosen
    starts = [f.start for f in chosen]
    ends = [f.end for f in chosen]
    dropped: set[int] = set()
    kept: list[SecretFinding] = []
    for cand in sorted(candidates, key=lambda f: (f.start, -f.end)):
        if kept and kept[-1].end > cand.start:
            continue
        hits = range(bisect_right(ends, cand.start), bisect_left(starts, cand.end))
        if hits and absorb:
            first, last = chosen[hits[0]], chosen[hits[-1]]
            if (cand.start, cand.end) == (first.start, last.end):
                continue
            if cand.start <= first.start and last.end <= cand.end:
                dropped.update(hits)
            elif cand.start < first.start:
                cand = SecretFinding(cand.kind, cand.start, first.start)  # noqa: PLW2901
            else:
                continue
        elif hits:
            continue
        kept.append(cand)
    survivors = [f for i, f in enumerate(chosen) if i not in dropped]
    return sorted(survivors + kept, key=lambda f: f.start)


def _scan(text: str, chosen: list[SecretFinding]) -> list[SecretFinding]:
    lowered = text.lower()
    chosen = _merge(chosen, _specific_findings(text, lowered), absorb=False)
    return _merge(chosen, _context_findings(text, lowered), absorb=True)


def _mask(text: str, findings: list[SecretFinding]) -> str:
    """``text`` with each finding blanked by NULs of the same length, so offsets hold."""
    parts: list[str] = []
    last = 0
    for finding in findings:
        parts += [text[last : finding.start], "\x00" * (finding.end - finding.start)]
        last = finding.end
    parts.append(text[last:])
    return "".join(parts)


def _find_folded(text: str) -> list[SecretFinding]:
    findings = _scan(text, [])
    for _ in range(_RESCANS):
        if not findings:
            break
        more = _scan(_mask(text, findings), findings)
        if more == findings:
            break
        findings = more
    return findings


def find_secrets(text: str) -> list[SecretFinding]:
    """Credential-like spans of ``text``, sorted by start and non-overlapping.

    A key glued to the end of another one only starts a match once the first is blanked
    out, so the scan repeats on the masked text while it finds more (a few rounds at most).
    """
    if not text:
        return []
    folded = fold(text)
    findings = _find_folded(folded.text)
    if folded.identity:
        return findings
    mapped: list[SecretFinding] = []
    for finding in findings:
        start, end = folded.span(finding.start, finding.end)
        if mapped and start < mapped[-1].end:
            start = mapped[-1].end
        if start < end:
            mapped.append(SecretFinding(finding.kind, start, end))
    return mapped


def scrub_secrets(text: str) -> tuple[str, list[SecretFinding]]:
    """Replace every finding with ``[REDACTED:<kind>]``; offsets refer to the input text."""
    findings = find_secrets(text)
    parts: list[str] = []
    last = 0
    for finding in findings:
        parts.append(text[last : finding.start])
        parts.append(f"[REDACTED:{finding.kind}]")
        last = finding.end
    parts.append(text[last:])
    return "".join(parts), findings


def secret_error(findings: Sequence[SecretFinding]) -> SecretDetected:
    """The 422 ``secret_detected`` error for ``findings``; it never carries the secret."""
    spans = ", ".join(
        f"{f.kind} at {field + ':' if (field := getattr(f, 'field', '')) else ''}{f.start}-{f.end}"
        for f in findings
    )
    message = (
        f"The text looks like it holds a secret{': ' + spans if spans else ''}. "
        "Store a pointer to it instead, such as a vault path or an env var name."
    )
    listed: list[dict[str, object]] = []
    for f in findings:
        entry: dict[str, object] = {"kind": f.kind, "start": f.start, "end": f.end}
        if field := getattr(f, "field", ""):
            entry["field"] = field
        listed.append(entry)
    return SecretDetected(message, details={"findings": listed})
