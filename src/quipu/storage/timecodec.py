"""Datetimes as integer microseconds since the epoch (UTC), for stores and vector caches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Stand-in for "no end" in numeric comparisons.
FOREVER = 2**62


def to_micros(value: datetime) -> int:
    delta = value.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def to_micros_opt(value: datetime | None) -> int | None:
    return None if value is None else to_micros(value)


def from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def from_micros_opt(value: int | None) -> datetime | None:
    return None if value is None else from_micros(value)
