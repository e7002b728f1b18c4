"""Snapshots travel with a whole-store move (OPS-2 with LIFE-8, issue 27): ``quipu export``
writes every snapshot (its pinned versions, label, author and time) and ``quipu import`` puts
them back verbatim, skipping those present, into SQLite and into PostgreSQL; a snapshot pins
the same versions after the move. A malformed snapshot record is refused with its code.

The PostgreSQL half needs the throwaway server (``scripts/with-testdb.sh``)."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from quipu import portability
from quipu.composition import build_runtime, load_settings
from quipu.core.governance import Snapshot
from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import InvalidInput
from quipu.memories import MemoryService
from quipu.storage.base import Store
from quipu.storage.sqlite.store import SQLiteStore
from tests.conftest import PG_URL, schema_url

IMPORTER = Principal("local", "local", Role.ADMIN, surface="cli")


@pytest.fixture(scope="module")
def export(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[tuple[list[str], list[Snapshot]]]:
    """Two tenants' memories and three snapshots (one pinning a superseded version), exported."""
    folder = tmp_path_factory.mktemp("snapshot-move")
    settings = load_settings({"database": str(folder / "source.db")}, environ={})
    store = SQLiteStore(settings.database)
    service = MemoryService(store, local_embedder, Limits())
    runtime = build_runtime(settings, service)
    for tenant in ("acme", "beta"):
        who = Principal(tenant, "k-admin", Role.ADMIN, agent_id="scout", user_id="dana")
        first = service.remember(who, f"{tenant}: deploys go out on Tuesdays").memory
        second = service.remember(who, f"{tenant}: Dana prefers aisle seats", scope="user").memory
        runtime.governance.snapshot_create(who, ids=[first.id, second.id], label="run 1")
        service.revise(who, first.id, f"{tenant}: deploys go out on Wednesdays", expected_version=1)
        if tenant == "acme":
            runtime.governance.snapshot_create(
                who, members=[{"id": first.id, "version": 1}], label=None
            )
    snapshots = list(store.export_snapshots(None))
    out = io.StringIO()
    portability.write_export(out, store, None)
    runtime.close()
    yield out.getvalue().splitlines(keepends=True), snapshots


def _into(target: Store, embedder: LocalEmbedder, lines: list[str]) -> dict[str, int]:
    service = MemoryService(target, embedder, Limits())
    return portability.import_records(service, IMPORTER, lines).added


def _check_move(
    target: Store, embedder: LocalEmbedder, export: tuple[list[str], list[Snapshot]]
) -> None:
    lines, snapshots = export
    assert len(snapshots) == 3
    assert sum('"type": "snapshot"' in line for line in lines) == 3
    added = _into(target, embedder, lines)
    assert added["snapshot"] == 3
    assert list(target.export_snapshots(None)) == snapshots  # verbatim: ids, members, times
    assert list(target.export_snapshots("beta")) == [s for s in snapshots if s.tenant_id == "beta"]
    pinned = next(s for s in snapshots if s.tenant_id == "acme" and s.label is None)
    assert target.get_snapshot("acme", pinned.snapshot_id) == pinned
    member = pinned.members[0]
    versions = {(m.id, m.version): m for m, _ in target.export_versions("acme")}
    assert versions[(member.id, member.version)].text == "acme: deploys go out on Tuesdays"
    again = _into(target, embedder, lines)  # re-running adds nothing
    assert again["snapshot"] == 0 and list(target.export_snapshots(None)) == snapshots


def test_life_008_ops_002_snapshots_move_into_sqlite(
    export: tuple[list[str], list[Snapshot]], tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    target = SQLiteStore(tmp_path / "copy.db")
    try:
        _check_move(target, local_embedder, export)
    finally:
        target.close()


@pytest.mark.postgres
def test_life_008_ops_002_snapshots_move_into_postgres(
    export: tuple[list[str], list[Snapshot]], local_embedder: LocalEmbedder
) -> None:
    if PG_URL is None:
        pytest.skip("needs the test PostgreSQL server (scripts/with-testdb.sh)")
    from quipu.storage.postgres.store import PostgresStore
    from tests.support.pg import drop_schema, new_schema

    schema = new_schema(PG_URL, f"t_snap_{uuid.uuid4().hex[:10]}")
    target = PostgresStore(schema_url(PG_URL, schema))
    try:
        _check_move(target, local_embedder, export)
    finally:
        target.close()
        drop_schema(PG_URL, schema)


def test_life_008_tenant_export_holds_only_its_snapshots(
    export: tuple[list[str], list[Snapshot]], tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    lines, snapshots = export
    target = SQLiteStore(tmp_path / "beta.db")
    try:
        service = MemoryService(target, local_embedder, Limits())
        portability.import_records(service, IMPORTER, lines, tenant_id="beta")
        assert list(target.export_snapshots(None)) == [
            s for s in snapshots if s.tenant_id == "beta"
        ]
    finally:
        target.close()


@pytest.mark.parametrize(
    "record",
    [
        '{"type": "snapshot", "tenant_id": "x", "snapshot_id": "s"}',
        '{"type": "snapshot", "tenant_id": "x", "snapshot_id": "s", "created_by": "k",'
        ' "created_at": "2024-01-01T00:00:00+00:00", "members": {"id": "m"}}',
        '{"type": "snapshot", "tenant_id": "x", "snapshot_id": "s", "created_by": "k",'
        ' "created_at": "2024-01-01T00:00:00+00:00", "members": [{"id": "m", "version": "v"}]}',
    ],
)
def test_safe_005_a_malformed_snapshot_record_is_refused(
    tmp_path: Path, local_embedder: LocalEmbedder, record: str
) -> None:
    head = '{"type": "header", "format": "quipu-export", "version": 2, "tenant": null}\n'
    target = SQLiteStore(tmp_path / "t.db")
    try:
        with pytest.raises(InvalidInput) as refused:
            _into(target, local_embedder, [head, record + "\n"])
        assert refused.value.code == "invalid_export" and "snapshot" in refused.value.message
        assert list(target.export_snapshots(None)) == []
    finally:
        target.close()
