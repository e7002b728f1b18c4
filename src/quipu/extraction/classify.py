"""Classify a clause: try the statement rules, then the fallbacks. Pure.

:func:`classify` reads one cleaned clause of a user turn and returns the durable
statements in it: a kind, a confidence, the standalone text, and a *slot* (what the
statement is about, such as ``live`` or ``my:manager:is:NAME``) so that a later statement
about the same slot can supersede it. Rules are tried in order; the first that matches
decides.
"""

from __future__ import annotations

import re

from quipu.core.records import Kind
from quipu.extraction.instructions import INSTRUCTION_RULES
from quipu.extraction.lexicon import (
    ADV,
    APPOSITIVE,
    DURABLE_STATES,
    LEAD_WORD,
    POSSESSIVE_SUBJECT,
    PRONOUN_SUBJECT,
)
from quipu.extraction.rules import RULES, value_after
from quipu.extraction.statement import Finding, Statement, canonical

__all__ = ["classify"]


def _appositive(s: Statement) -> Finding | None:
    """ "My manager Rosa asked me ...": the relation and the name, when nothing else matched."""
    for m in APPOSITIVE.finditer(s.canon):
        words = m["name"].split()
        original = [re.search(rf"\b{re.escape(w)}\b", s.body, re.IGNORECASE) for w in words]
        names = []
        for found in original:
            if found is None or not found.group()[0].isupper():
                break
            names.append(found.group())
        if not names:
            continue
        who = "User's" if m["poss"] == "my" else f"{s.we_as}'s"
        name = " ".join(names)
        return Finding(
            Kind.FACT, 0.7, f"{who} {m['rel']} is {name}", slot=f"my:{m['rel']}:is:NAME", value=name
        )
    return None


def _reordered(s: Statement) -> tuple[Statement, str] | None:
    """ "For my coffee I go for oat milk" as "I go for oat milk for my coffee", and the lead."""
    when = re.match(
        r"^(?P<cond>(?:whenever|every time|each time|when) .+?),? (?P<main>(?:i|we) (?:always"
        r"|usually"
        r"|never|tend to|typically|generally|normally|often|rarely) .+)$",
        s.body,
        re.IGNORECASE,
    )
    if when:
        cond = when["cond"]
        body = f"{when['main']} {cond[:1].lower()}{cond[1:]}"
        return Statement(body=body, canon=canonical(body), we_as=s.we_as), ""
    if not LEAD_WORD.match(s.body):
        return None
    subject = PRONOUN_SUBJECT.search(s.body, 3) or POSSESSIVE_SUBJECT.search(s.body, 3)
    if subject is None or subject.start() > 70:
        return None
    lead = s.body[: subject.start()].strip(" ,;")
    rest = s.body[subject.start() :].strip()
    if not lead or not rest:
        return None
    body = f"{rest} {lead[:1].lower()}{lead[1:]}"
    return Statement(body=body, canon=canonical(body), we_as=s.we_as), lead


def _first_match(s: Statement) -> Finding | None:
    for rule in (*RULES, *INSTRUCTION_RULES):
        finding = rule(s)
        if finding is not None:
            return finding
    return None


def _identity_list(s: Statement) -> list[Finding]:
    """ "I'm 42, recently divorced, and a nurse": one fact per durable part."""
    m = re.match(rf"^(?:i){ADV} am (?P<pred>.+)$", s.canon)
    if not m or "," not in m["pred"]:
        return []
    parts = [p.strip() for p in re.split(r",\s*(?:and\s+)?|\s+and\s+", m["pred"]) if p.strip()]
    durable = [p for p in parts if DURABLE_STATES.match(p)]
    if len(parts) < 2 or not durable:
        return []
    return [
        Finding(Kind.FACT, 0.8, f"User is {value_after(s.body, part)}", value=part)
        for part in durable
    ]


def classify(s: Statement) -> list[Finding]:
    """The durable statements in ``s``: usually one, none for anything else.

    A leading phrase ("For my coffee, I ...", "Starting Monday I'll ...") is moved to the
    end before the rules run; a leading role ("As a left-handed guitarist, I ...") is also
    a statement of its own. When no rule matches, a named relation ("my manager Rosa") is.
    """
    listed = _identity_list(s)
    if listed:
        return listed
    found: list[Finding] = []
    finding = _first_match(s)
    if finding is None:
        moved = _reordered(s)
        if moved is not None:
            statement, lead = moved
            finding = _first_match(statement)
            role = re.match(r"^(?:as|being) (?P<np>an? .+)$", lead, re.IGNORECASE)
            if role:
                found.append(
                    Finding(Kind.FACT, 0.7, f"User is {role['np']}", slot="role", value=role["np"])
                )
    if finding is not None:
        found.append(finding)
    if not found:
        appositive = _appositive(s)
        if appositive is not None:
            found.append(appositive)
    return found
