"""Resolve relative time expressions against the time a turn was said. Pure.

"I'm flying to Tokyo tomorrow", said on 2024-03-04, is stored as "... on 2024-03-05": a
memory outlives the conversation, so "tomorrow" must not. Only unambiguous expressions are
resolved (today, tonight, tomorrow, yesterday, in N days/weeks, next/last week, month and
year, next season); weekday names are left alone ("next Friday" is read two ways).
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

__all__ = ["TRANSIENT", "resolve_relative_dates"]

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}

#: Expressions that make a fact or preference about *now* rather than something durable.
TRANSIENT = re.compile(
    r"\b(?:today|tonight|right now|right here|at the moment|this (?:morning|afternoon|evening"
    r"|weekend)|just now|atm|rn)\b",
    re.IGNORECASE,
)

_RELATIVE = re.compile(
    r"\b(?P<day>today|tonight|tomorrow|yesterday)\b(?!['’]s)"
    r"|\bin (?P<n>\d{1,2}|a|an|one|two|three|four|five|six) (?P<unit>days?|weeks?)\b"
    r"(?! and a half| or (?:so|two|three))"
    r"|\b(?P<rel>next|last|this) (?P<span>week|month|year|spring|summer|autumn|fall|winter)\b",
    re.IGNORECASE,
)


def _month_name(day: date) -> str:
    return f"{_MONTHS[day.month - 1]} {day.year}"


def _shift_month(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _season_year(today: date, season: str, rel: str) -> int:
    """The year of "next/this/last <season>"; a season is named by the year it starts in."""
    start = _SEASONS[season]
    recent = today.year if today.month >= start else today.year - 1  # latest start so far
    months_in = (today.year - recent) * 12 + today.month - start
    in_progress = months_in < 3
    if rel == "next":
        return recent + 1
    if rel == "this":
        return recent if in_progress else recent + 1
    return recent - 1 if in_progress else recent


def _replace(match: re.Match[str], today: date) -> str:
    if match["day"]:
        word = match["day"].lower()
        if word == "today":
            return f"on {today.isoformat()}"
        if word == "tonight":
            return f"on the night of {today.isoformat()}"
        offset = 1 if word == "tomorrow" else -1
        return f"on {(today + timedelta(days=offset)).isoformat()}"
    if match["n"]:
        raw = match["n"].lower()
        count = int(raw) if raw.isdigit() else _NUMBER_WORDS[raw]
        days = count * (7 if match["unit"].lower().startswith("week") else 1)
        when = (today + timedelta(days=days)).isoformat()
        return f"on {when}" if days < 7 else f"around {when}"
    rel, span = match["rel"].lower(), match["span"].lower()
    step = {"next": 1, "last": -1, "this": 0}[rel]
    if span == "week":
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
        return f"in the week of {monday.isoformat()}"
    if span == "month":
        return f"in {_month_name(_shift_month(today, step))}"
    if span == "year":
        return f"in {today.year + step}"
    return f"in {span} {_season_year(today, span, rel)}"


def resolve_relative_dates(text: str, at: datetime | None) -> str:
    """``text`` with relative expressions replaced by dates, when ``at`` is known."""
    if at is None:
        return text
    today = at.date()
    out = _RELATIVE.sub(lambda m: _replace(m, today), text)
    # "a meal for next week" is "a meal for the week of …", never "for in the week of …"
    return _DOUBLE_PREPOSITION.sub(r"\g<1> ", out)


_DOUBLE_PREPOSITION = re.compile(
    r"\b(for|by|until|till|before|after|from|since|of|during) (?:in|on) (?=the week of|\d|[A-Z])"
)
