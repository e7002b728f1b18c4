"""A store used after close() answers quipu.Closed (client_closed) on every backend, not the
driver's own exception (a closed sqlite3 connection, a closed psycopg pool)."""

from __future__ import annotations

from typing import Any

import pytest

from quipu.errors import Closed


def test_a_closed_store_refuses_reads_and_writes_with_a_stable_code(make_store: Any) -> None:
    store = make_store()
    assert store.list_tenants() == []
    store.close()
    for call in (store.list_tenants, lambda: store.get_tenant("t1")):
        with pytest.raises(Closed) as refused:
            call()
        assert refused.value.code == "client_closed"
