"""Retry-After is whole seconds rounded up (API-3): a client that waits exactly what it is told
must not meet a second 429."""

from __future__ import annotations

import pytest

from quipu.errors import LimitExceeded
from quipu.surfaces.http.errors import error_response


@pytest.mark.parametrize(
    ("wait", "header"), [(0.01, "1"), (1.0, "1"), (1.2, "2"), (1.5, "2"), (2.4, "3"), (59.9, "60")]
)
def test_retry_after_rounds_up(wait: float, header: str) -> None:
    refused = LimitExceeded("slow down", code="rate_limited", retry_after=wait)
    assert error_response(refused).headers["Retry-After"] == header
