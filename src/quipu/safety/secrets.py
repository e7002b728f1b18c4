"""Secret detection and scrubbing (SAFE-1).

``find_secrets`` returns the credential-like spans of a text; write paths refuse such text
with ``secret_error``; extracted and promoted text goes through ``scrub_secrets`` instead.

Patterns either start behind a lookbehind that excludes the characters they then scan
(with possessive quantifiers), or scan a bounded distance: no match attempt backtracks
or walks far, so the scan stays linear in the length of the text.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from quipu.errors import SecretDetected

__all__ = ["SecretFinding", "find_secrets", "scrub_secrets", "secret_error"]


@dataclass(frozen=True)
class SecretFinding:
    """One credential-like span: ``text[start:end]`` in the original string."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool] | None = None


_ALNUM_BEHIND = r"(?<![A-Za-z0-9_\-])"


def _rule(kind: str, pattern: str, check: Callable[[str], bool] | None = None) -> _Rule:
    return _Rule(kind, re.compile(pattern), check)


def _mixed(token: str) -> bool:
    """True when a token mixes at least two of lower, upper and digits, like random keys do."""
    classes = (
        any(c.islower() for c in token),
        any(c.isupper() for c in token),
        any(c.isdigit() for c in token),
    )
    return sum(classes) >= 2


def _luhn(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        n = ord(char) - 48
        if i % 2 == 1:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _card(candidate: str) -> bool:
    digits = re.sub(r"[ \-]", "", candidate)
    return (
        13 <= len(digits) <= 19 and digits[0] in "23456" and len(set(digits)) > 1 and _luhn(digits)
    )


# Length of an IBAN per country (ISO 13616 registry).
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
    "BH": 22, "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24,
    "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
    "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27,
    "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
    "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27,
    "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28,
    "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
    "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip


def _iban_valid(compact: str) -> bool:
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def _iban_length(candidate: str) -> int:
    """Length of the longest prefix of ``candidate`` that is a valid IBAN, else 0.

    Shorter prefixes end at a space, so an upper-case word after a grouped IBAN is dropped.
    """
    cuts = [len(candidate)] + [i for i in range(len(candidate) - 1, 0, -1) if candidate[i] == " "]
    for cut in cuts:
        if _iban_valid(candidate[:cut].replace(" ", "")):
            return cut
    return 0


# Specific shapes: a vendor prefix, a checksum or a structure. They win over context rules.
_SPECIFIC = (
    _rule(
        "private_key",
        r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----",
    ),
    _rule("anthropic_key", _ALNUM_BEHIND + r"sk-ant-[A-Za-z0-9_\-]{20,}+"),
    _rule(
        "openai_key",
        _ALNUM_BEHIND + r"sk-(?!ant-)(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}+",
        lambda m: _mixed(m[3:]),
    ),
    _rule(
        "aws_access_key",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA)"
        r"[A-Z0-9]{16}(?![A-Za-z0-9])",
    ),
    _rule(
        "github_token",
        _ALNUM_BEHIND + r"(?:gh[pousr]_[A-Za-z0-9]{30,}+|github_pat_[A-Za-z0-9_]{22,}+)",
    ),
    _rule("gitlab_token", _ALNUM_BEHIND + r"gl(?:pat|dt|ptt|rt)-[A-Za-z0-9_\-]{20,}+"),
    _rule("slack_token", _ALNUM_BEHIND + r"(?:xox[abprs]|xapp)-[A-Za-z0-9\-]{10,}+"),
    _rule(
        "stripe_key",
        _ALNUM_BEHIND + r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}+",
    ),
    _rule("google_api_key", _ALNUM_BEHIND + r"AIza[A-Za-z0-9_\-]{35}"),
    _rule(
        "jwt",
        r"(?<![A-Za-z0-9_\-.])eyJ[A-Za-z0-9_\-]{4,}+\.eyJ[A-Za-z0-9_\-]{4,}+\.[A-Za-z0-9_\-]{8,}+",
    ),
    _rule(
        "payment_card",
        r"(?<![0-9A-Za-z.,\-])(?:[0-9]{13,19}"
        r"|[0-9]{4}(?P<sep>[ \-])[0-9]{4}(?P=sep)[0-9]{4}(?P=sep)[0-9]{4}(?:(?P=sep)[0-9]{3})?"
        r"|[0-9]{4}(?P<sep2>[ \-])[0-9]{6}(?P=sep2)[0-9]{4,5})(?![0-9]|[.,\-][0-9])",
        _card,
    ),
    _rule(
        "us_ssn",
        r"(?<![0-9A-Za-z\-])(?!000|666|9)[0-9]{3}-(?!00)[0-9]{2}-(?!0000)[0-9]{4}"
        r"(?![0-9A-Za-z]|-[0-9])",
    ),
    _rule(
        "uk_nino",
        r"(?<![A-Za-z0-9])(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]"
        r"(?: ?[0-9]{2}){3} ?[A-D](?![A-Za-z0-9])",
    ),
    _rule(
        "iban",
        r"(?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}"
        r"(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,3})?)(?![A-Za-z0-9])",
    ),
)

_PRIVATE_KEY_END = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PRIVATE_KEY_BODY = re.compile(r"(?:\s{0,4}[A-Za-z0-9+/=]{16,}+)*+")
_PRIVATE_KEY_MAX = 64_000
_RESCANS = 3

# Context rules: the value is a secret because of what names it. Values are captured in a
# lookahead so that a value can itself start the next match.
_ASSIGNMENT = re.compile(
    r"(?P<key>[A-Za-z0-9_\-.]{1,60}+)[\"']?"
    r"[ \t]{0,3}(?P<op>:=|=>|[:=])[ \t]{0,3}"
    r"(?=\"(?P<dq>[^\"\n]{1,200}+)\"|'(?P<sq>[^'\n]{1,200}+)'|(?P<bare>[^\s\"',;]{1,200}+))"
)
_PASSWORD_IS = re.compile(
    r"(?<![A-Za-z0-9_])(?:password|passcode|passphrase|passwd|pin)[ \t]{1,3}(?:is|was)[ \t]{1,3}"
    r"(?=\"(?P<dq>[^\"\n]{1,200}+)\"|'(?P<sq>[^'\n]{1,200}+)'|(?P<bare>[^\s\"']{1,200}+))",
    re.IGNORECASE,
)
_BEARER = re.compile(
    r"(?<![A-Za-z0-9])(?:bearer|authorization:[ \t]{0,3}(?:basic|token))[ \t]{1,3}"
    r"(?P<value>[A-Za-z0-9_\-.~+/]{16,}+=*)",
    re.IGNORECASE,
)
_URL_CREDENTIAL = re.compile(
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{1,20}://"
    r"[^\s:/@]{1,100}:(?P<value>[^\s@/]{1,200})@"
)
_AWS_SECRET = re.compile(
    r"(?<![A-Za-z0-9])aws[_\-. ]?secret(?:[_\-. ]?access)?[_\-. ]?key[\"']?[ \t]{0,3}[:=]{1,2}"
    r"[ \t]{0,3}[\"']?(?P<value>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
    re.IGNORECASE,
)

_PASSWORD_KEYS = ("password", "passwd", "pwd", "passphrase", "passcode", "secret")
_API_KEY_KEYS = (
    *("apikey", "accesskey", "secretkey", "privatekey", "token", "clientsecret"),
    *("credential", "credentials"),
)
_NOT_SECRET_KEYS = ("nexttoken", "pagetoken", "continuationtoken")
_PLACEHOLDERS = frozenset(
    {
        "none", "null", "nil", "true", "false", "required", "optional", "empty", "unset",
        "redacted", "hidden", "masked", "changeme", "password", "secret", "string", "str",
        "int", "bytes", "example", "placeholder", "your_password", "your_api_key", "todo",
    }
)  # fmt: skip
_POINTER_PREFIXES = (
    *("$", "%", "{{", "<", "[redacted", "env:", "vault:", "op://", "arn:", "ssm:"),
    *("/", "~", "./", "secret/", "secrets/", "kv/"),
)
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]{2,}")
# settings.db_password, get_password() (its ")" trimmed), os.environ[ (a quoted name follows)
_CODE_REF = re.compile(
    r"[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[A-Za-z_][\w.]*(?:\(.*\)|\[.*\]|[(\[])"
)


def _key_kind(key: str) -> str | None:
    joined = re.sub(r"[_\-.]", "", key.lower())
    if joined.endswith(_NOT_SECRET_KEYS):
        return None
    if joined.endswith(_API_KEY_KEYS):
        return "generic_api_key"
    if joined.endswith(_PASSWORD_KEYS):
        return "password_assignment"
    return None


def _is_pointer(value: str) -> bool:
    """Placeholders, env var names, vault paths and code references are not secrets."""
    lowered = value.lower()
    return (
        lowered in _PLACEHOLDERS
        or lowered.startswith(_POINTER_PREFIXES)
        or len(set(value)) == 1
        or _ENV_NAME.fullmatch(value) is not None
        or _CODE_REF.fullmatch(value) is not None
    )


def _followed_by_word(text: str, end: int) -> bool:
    return end + 1 < len(text) and text[end] in " \t" and text[end + 1].isalpha()


def _value(match: re.Match[str]) -> tuple[str, int, int, bool]:
    """The value group of a match: (value, start, end, quoted)."""
    for name in ("dq", "sq", "bare"):
        if match[name] is not None:
            return match[name], match.start(name), match.end(name), name != "bare"
    raise AssertionError("pattern always captures a value")


def _assignment_findings(text: str) -> Iterable[SecretFinding]:
    for match in _ASSIGNMENT.finditer(text):
        kind = _key_kind(match["key"])
        if kind is None:
            continue
        value, start, end, quoted = _value(match)
        word = value if quoted else value.rstrip(".,)")
        if _is_pointer(word):
            continue
        if kind == "password_assignment":
            if len(word) < 4:
                continue
            prose = match["op"] == ":" and not quoted and word.isalpha()
            if prose and _followed_by_word(text, end):
                continue
        elif len(word) < 12 or not _mixed(word):
            continue
        yield SecretFinding(kind, start, end)


def _password_is_findings(text: str) -> Iterable[SecretFinding]:
    for match in _PASSWORD_IS.finditer(text):
        value, start, end, quoted = _value(match)
        word = value if quoted else value.rstrip(".,;:)!?")
        # A plain word ("my password is something I forget") reads as prose.
        plain = word.isalpha() and (word.islower() or word.istitle() or word.isupper())
        if (quoted or not plain) and len(word) >= 4 and not _is_pointer(word):
            yield SecretFinding("password_assignment", start, end)


def _private_key_finding(text: str, match: re.Match[str], ends: list[int]) -> SecretFinding:
    """The whole block up to its END line, or the header and body when the END is missing."""
    i = bisect_right(ends, match.end())
    if i < len(ends) and ends[i] - match.start() <= _PRIVATE_KEY_MAX:
        return SecretFinding("private_key", match.start(), ends[i])
    body = _PRIVATE_KEY_BODY.match(text, match.end())
    end = body.end() if body else match.end()
    return SecretFinding("private_key", match.start(), min(end, match.end() + _PRIVATE_KEY_MAX))


def _specific_findings(text: str) -> list[SecretFinding]:
    found: list[SecretFinding] = []
    key_ends: list[int] | None = None
    for rule in _SPECIFIC:
        for match in rule.pattern.finditer(text):
            if rule.kind == "private_key":
                if key_ends is None:
                    key_ends = [m.end() for m in _PRIVATE_KEY_END.finditer(text)]
                found.append(_private_key_finding(text, match, key_ends))
            elif rule.kind == "iban":
                if length := _iban_length(match[0]):
                    found.append(SecretFinding("iban", match.start(), match.start() + length))
            elif rule.check is None or rule.check(match[0]):
                found.append(SecretFinding(rule.kind, match.start(), match.end()))
    return found


def _context_findings(text: str) -> list[SecretFinding]:
    found = [
        SecretFinding("aws_secret_key", m.start("value"), m.end("value"))
        for m in _AWS_SECRET.finditer(text)
    ]
    found += [
        SecretFinding("bearer_token", m.start("value"), m.end("value"))
        for m in _BEARER.finditer(text)
        if _mixed(m["value"])
    ]
    found += [
        SecretFinding("password_assignment", m.start("value"), m.end("value"))
        for m in _URL_CREDENTIAL.finditer(text)
        if not _is_pointer(m["value"])
    ]
    found += _assignment_findings(text)
    found += _password_is_findings(text)
    return found


def _merge(
    chosen: list[SecretFinding], candidates: list[SecretFinding], absorb: bool
) -> list[SecretFinding]:
    """Add candidates (earliest, then longest first) that overlap nothing already kept.

    With ``absorb`` (context rules), a candidate that strictly contains the findings it
    overlaps replaces them (``password=ab!sk-...`` is one password), and one that runs into
    a finding keeps its head up to that finding, so no part of the value stays visible.
    """
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
    chosen = _merge(chosen, _specific_findings(text), absorb=False)
    return _merge(chosen, _context_findings(text), absorb=True)


def _mask(text: str, findings: list[SecretFinding]) -> str:
    """``text`` with each finding blanked by NULs of the same length, so offsets hold."""
    parts: list[str] = []
    last = 0
    for finding in findings:
        parts += [text[last : finding.start], "\x00" * (finding.end - finding.start)]
        last = finding.end
    parts.append(text[last:])
    return "".join(parts)


def find_secrets(text: str) -> list[SecretFinding]:
    """Credential-like spans of ``text``, sorted by start and non-overlapping.

    A key glued to the end of another one only starts a match once the first is blanked
    out, so the scan repeats on the masked text while it finds more (a few rounds at most).
    """
    if not text:
        return []
    findings = _scan(text, [])
    for _ in range(_RESCANS):
        if not findings:
            break
        more = _scan(_mask(text, findings), findings)
        if more == findings:
            break
        findings = more
    return findings


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
    spans = ", ".join(f"{f.kind} at {f.start}-{f.end}" for f in findings)
    message = (
        f"The text looks like it holds a secret{': ' + spans if spans else ''}. "
        "Store a pointer to it instead, such as a vault path or an env var name."
    )
    details = {"findings": [{"kind": f.kind, "start": f.start, "end": f.end} for f in findings]}
    return SecretDetected(message, details=details)
