"""Revision 2 of the deterministic rules (issue 24). Pure.

:func:`turn_kind` classifies a user turn before any rule reads it: facts come from the user
talking about themselves (``chat``), never from a pasted document, code, a template to fill
or a role-play prompt (the issue's "should not have been stored" cases).

:func:`event_finding` reads a first-person clause no earlier rule matched: a past event
("I adopted a rescue dog last month"), a purchase and its amount ("I bought an $800
handbag"), a quantity or duration ("I spent 70 hours restoring the desk"). A leading time
phrase ("Yesterday I ...", "Last week, I ...") is moved to the end first, so relative dates
resolve as they do elsewhere.
"""

from __future__ import annotations

import re

from quipu.core.records import Kind
from quipu.extraction.rewrite import third_person
from quipu.extraction.statement import Finding

__all__ = ["event_finding", "lead_time_moved", "turn_kind"]

_CODE_LINE = re.compile(
    r"^\s*(?:def |class |import |from \S+ import |function |const |let |var |public |private "
    r"|#include|SELECT |INSERT |<\w+[ >/]|\}|\{|//|/\*|\$ |>>> )|[;{}]\s*$"
)
_ROLE_PLAY = re.compile(
    r"\b(?:pretend (?:to be|you are|you're)|act as (?:a|an|my|if)|role-?play|imagine you are"
    r"|from now on,? you|you are (?:now )?(?:a|an) (?:\w+ ){0,3}(?:named|called)|stay in character"
    r"|you will (?:play|act as)|respond as (?:a|an|if))\b",
    re.IGNORECASE,
)
_PLACEHOLDER = re.compile(
    r"\[(?:your|insert|name|date|company)[^\]]{0,30}\]|\{\{?\w+\}?\}|_{4,}", re.I
)
_FIRST = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|me|mine|we|our|us)\b", re.IGNORECASE)


def turn_kind(content: str) -> str:
    """``chat``, or what the turn is instead: ``code``, ``roleplay``, ``template`` or
    ``document`` (a long paste in which the user hardly speaks in the first person)."""
    lines = [line for line in content.splitlines() if line.strip()]
    if "```" in content or (
        len(lines) >= 3 and sum(bool(_CODE_LINE.search(line)) for line in lines) >= len(lines) / 3
    ):
        return "code"
    if _ROLE_PLAY.search(content):
        return "roleplay"
    if len(_PLACEHOLDER.findall(content)) >= 2:
        return "template"
    words = len(content.split())
    if words >= 250 and len(_FIRST.findall(content)) * 100 < words:
        return "document"
    return "chat"


_LEAD_TIME = re.compile(
    r"^(?P<lead>(?:just )?(?:yesterday|today|tonight|this (?:morning|afternoon|evening|week"
    r"|weekend|month|year)|last (?:night|week|weekend|month|year|spring|summer|autumn|fall|winter"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|over the weekend|recently"
    r"|a (?:few|couple of) (?:days|weeks|months|years) ago|(?:two|three|four|five|\d+) (?:days"
    r"|weeks|months|years) ago|earlier (?:today|this week)))[,\s]+(?P<rest>(?:i|we)\b.+)$",
    re.IGNORECASE,
)


def lead_time_moved(body: str) -> str | None:
    """ "Yesterday I adopted a dog" as "I adopted a dog yesterday"; None without such a lead."""
    m = _LEAD_TIME.match(body)
    if not m:
        return None
    lead = m["lead"]
    return f"{m['rest'].rstrip(' .!')} {lead[:1].lower()}{lead[1:]}"


_EVENT = re.compile(
    r"^(?P<subj>i|we)(?: (?:just|recently|finally|already|also|actually|eventually|once))? "
    r"(?P<verb>adopted|bought|purchased|ordered|received|spent|paid|visited|attended|finished"
    r"|completed|joined|ran|watched|met|booked|planted|built|baked|cooked|painted|restored"
    r"|repaired|sold|donated|won|traveled|travelled|flew|hiked|graduated|earned|saved|raised"
    r"|rescued|married|upgraded|replaced|installed|subscribed|cancelled|canceled|returned"
    r"|learned|learnt|wrote|published|launched|volunteered|signed up|enrolled|redeemed"
    r"|collected|organized|organised|hosted|celebrated|picked up|got (?:married|engaged|promoted"
    r"|a new|my first|an? \w+ (?:from|for|at))|started (?:a|an|my|learning|taking|working)"
    r"|took (?:a|an|my) (?:\w+ )?(?:class|course|trip|lesson|workshop|vacation|holiday)"
    r"|went (?:to|on) (?:a|an|the|my)? ?\w+|made (?:a|an|my) (?:\w+ )?\w+|read (?:a|an|the|\")"
    r"|saw (?:a|an|the) (?:\w+ )?(?:concert|show|play|movie|film|musical|exhibit\w*|game))"
    r"\b(?P<rest>.*)$",
    re.IGNORECASE,
)
_NOT_AN_EVENT = re.compile(
    r"^\s*(?:it|this|that|them|those|these|you|your|some time|a while|a lot of time (?:thinking"
    r"|wondering)|watching|reading|eating|working|cleaning|talking|doing|chatting)\b"
    r"|\b(?:mistake|sure|sense|point|decision to ask)\b",
    re.IGNORECASE,
)
_QUANTITY = re.compile(
    r"(?:\$\s?\d|\d+\s?(?:%|dollars|euros|pounds|hours?|days?|weeks?|months?|years?|miles?|km"
    r"|kilometers|pounds|lbs|kg|times|books|episodes|pages)\b|\b(?:one|two|three|four|five|six"
    r"|seven|eight|nine|ten|twenty|thirty|forty|fifty|hundred)\b)",
    re.IGNORECASE,
)


def event_finding(body: str, canon: str, *, we_as: str) -> Finding | None:
    """A past event, purchase, amount or duration the user states about themselves."""
    m = _EVENT.match(canon)
    if not m:
        return None
    rest = m["rest"].strip(" .!")
    if len(canon.split()) < 3 or _NOT_AN_EVENT.search(rest) or _NOT_AN_EVENT.search(m["verb"]):
        return None
    if len(body.split()) > 30:
        return None
    confidence = 0.7 if _QUANTITY.search(body) else 0.6
    return Finding(Kind.FACT, confidence, third_person(body.rstrip(" .!"), we_as=we_as))
