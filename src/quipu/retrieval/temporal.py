"""Dates named in a query, as observation windows (RECALL temporal boost). Pure.

A query that names a calendar date ("on 13 October 2023", "October 13, 2023"), a month of a
year ("in May 2023") or a year ("in 2022") is most often asking about what was said around
then. :func:`query_windows` turns each such mention into a half-open ``[start, end)`` window
in UTC; recall then lifts memories whose ``observed_at`` falls inside one (a boost, never a
filter: a memory from another time can still win on its words).

Only absolute dates are read. Relative ones ("last week", "two months ago") depend on when
the question is asked, and a memory store cannot know that of a past conversation. The most
specific form found wins: a day mention suppresses the month and year forms inside it.

Each window is widened by :data:`SLACK` after its end, because people report an event in the
days after it happened.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from quipu.core.query import Filters

__all__ = ["SLACK", "TimeWindow", "query_windows", "window_filters"]

#: How far past a named date an observation still counts as "around then".
SLACK = timedelta(days=7)

_MONTH_NAMES = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTHS = {name: number for number, name in enumerate(_MONTH_NAMES, start=1)}
_MONTHS.update({name[:3]: number for name, number in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_MONTH = r"(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"

_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE)
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE)
_ISO_DATE = re.compile(r"\b((?:19|20)\d\d)-(\d{2})-(\d{2})\b")
_YEAR_ALONE = re.compile(rf"\b(?:in|of|during|since|from|until|before|after)\s+{_YEAR}\b")


@dataclass(frozen=True)
class TimeWindow:
    start: datetime
    end: datetime
    """Exclusive; :data:`SLACK` already added."""


def _day(year: int, month: int, day: int) -> TimeWindow | None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:
        return None
    return TimeWindow(start, start + timedelta(days=1) + SLACK)


def _month(year: int, month: int) -> TimeWindow:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return TimeWindow(start, end + SLACK)


def _days(text: str) -> Iterator[TimeWindow | None]:
    for match in _MONTH_DAY_YEAR.finditer(text):
        month, day, year = match.groups()
        yield _day(int(year), _MONTHS[month.lower()], int(day))
    for match in _DAY_MONTH_YEAR.finditer(text):
        day, month, year = match.groups()
        yield _day(int(year), _MONTHS[month.lower()], int(day))
    for match in _ISO_DATE.finditer(text):
        year, month, day = match.groups()
        yield _day(int(year), int(month), int(day))


def query_windows(text: str) -> list[TimeWindow]:
    """The windows of the absolute dates ``text`` names, most specific form only, in order."""
    days = [window for window in _days(text) if window is not None]
    if days:
        return list(dict.fromkeys(days))
    months = [
        _month(int(match.group(2)), _MONTHS[match.group(1).lower()])
        for match in _MONTH_YEAR.finditer(text)
    ]
    if months:
        return list(dict.fromkeys(months))
    years = [int(match.group(1)) for match in _YEAR_ALONE.finditer(text)]
    return [
        TimeWindow(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC) + SLACK)
        for year in dict.fromkeys(years)
    ]


def window_filters(filters: Filters, window: TimeWindow) -> Filters | None:
    """``filters`` narrowed to observations inside ``window``; ``None`` when nothing can pass."""
    after = window.start
    if filters.observed_after is not None and filters.observed_after > after:
        after = filters.observed_after
    before = window.end
    if filters.observed_before is not None and filters.observed_before < before:
        before = filters.observed_before
    if after >= before:
        return None
    return replace(filters, observed_after=after, observed_before=before)
