"""Writing a version on a Citus cluster: the same rows as the one-statement write of
:mod:`quipu.storage.postgres.rows`, as statements Citus routes whole to the tenant's worker.

Why a second form. On one node a version, its audit line, aliases, term counts and scope
counters go in one statement of data-modifying CTEs (``rows.INSERT_SQL``). Citus cannot run that
on a worker: it plans every modifying CTE as a separate subplan whose rows travel through the
coordinator (``Distributed Subplan``, ``INSERT/SELECT method: pull to coordinator``), and the
key's ``nextval('memory_key_seq')`` names a sequence that exists on the coordinator only
(issue 30: ``relation "memory_key_seq" does not exist`` on the first remember). So here:

* the storage key and the audit line's number are drawn first, on the coordinator
  (:data:`DRAW_KEYS_SQL`), and passed in as values;
* every statement is a plain ``INSERT … VALUES`` or ``UPDATE … WHERE tenant_id = …``, which
  Citus routes as a single task to the shard group holding the tenant (one worker, no
  broadcast; tests/contract/test_citus.py asserts it on ``EXPLAIN``);
* the duplicate and quota checks the one-statement form does in its ``WHERE`` are made by the
  caller beforehand, under the scope owner's row lock, which is what makes them hold (MEM-5,
  MEM-6): the lock is taken on the worker and kept to the end of the transaction.

The client sends the statements in one pipeline; the coordinator keeps one connection to the
worker for the transaction, and a transaction that wrote on one worker commits without
two-phase commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from quipu.storage.postgres.rows import KEY_SPAN, WRITE_COLUMNS, WRITE_VALUES

#: The new version's storage key (``tenant number * KEY_SPAN + nextval``) and its audit line's
#: number, from the coordinator's sequences.
DRAW_KEYS_SQL = f"SELECT %s::bigint * {KEY_SPAN} + nextval('memory_key_seq'), nextval('audit_seq')"

_INSERT_VERSION = (
    f"INSERT INTO memory_versions (key, {', '.join(WRITE_COLUMNS)})"
    f" VALUES (%(key)s, {WRITE_VALUES})"
)
_INSERT_AUDIT = (
    "INSERT INTO audit_log (tenant_id, seq, at, actor_key, role, agent_id, user_id, surface,"
    " action, target_ids, reason, details) VALUES (%(c_tenant_id)s, %(a_seq)s, %(a_at)s,"
    " %(a_actor)s, %(a_role)s, %(a_agent)s, %(a_user)s, %(a_surface)s, %(a_action)s,"
    " %(a_targets)s, %(a_reason)s, %(a_details)s::json)"
)
_UPDATE_SCOPE = (
    "UPDATE scope_state SET live_count = live_count + %(d_live)s,"
    " current_count = current_count + %(d_current)s, version_count = version_count + 1,"
    " term_total = term_total + %(c_term_count)s"
    " WHERE tenant_id = %(c_tenant_id)s AND scope = %(c_scope)s AND owner = %(c_owner)s"
)
#: Rows per multi-row VALUES statement (aliases, term counts): far below the protocol's
#: 65,535 parameters, and one statement for any ordinary memory.
_BATCH = 1000


def draw_keys(conn: psycopg.Connection[Any], number: int) -> tuple[int, int]:
    """(storage key, audit number) for a new version of the tenant with key prefix ``number``."""
    row = conn.execute(DRAW_KEYS_SQL, (number,)).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def write(conn: psycopg.Connection[Any], params: dict[str, Any], *, terms_tracked: bool) -> int:
    """Write what ``rows.WRITE_SQL`` writes, from the same ``params`` (``rows.write_params``),
    as single-shard statements; returns the new key. Call inside the transaction that holds the
    scope owner's row lock; ``terms_tracked`` is that row's flag (read with the lock)."""
    key, seq = draw_keys(conn, int(params["number"]))
    params = {**params, "key": key, "a_seq": seq}
    tenant, scope, owner = params["c_tenant_id"], params["c_scope"], params["c_owner"]
    with conn.pipeline():
        conn.execute(_INSERT_VERSION, params)
        conn.execute(_INSERT_AUDIT, params)
        _insert_rows(
            conn,
            "INSERT INTO memory_aliases (tenant_id, scope, owner, folded, key) VALUES {}"
            " ON CONFLICT DO NOTHING",
            [(tenant, scope, owner, folded, key) for folded in params["folded"]],
        )
        if terms_tracked:
            _insert_rows(
                conn,
                "INSERT INTO scope_terms AS x (tenant_id, scope, owner, lexeme, df) VALUES {}"
                " ON CONFLICT (tenant_id, scope, owner, lexeme) DO UPDATE SET df = x.df + 1",
                [(tenant, scope, owner, lexeme, 1) for lexeme in params["lexemes"]],
            )
        conn.execute(_UPDATE_SCOPE, params)
    return key


def _insert_rows(
    conn: psycopg.Connection[Any], statement: str, rows: Sequence[tuple[Any, ...]]
) -> None:
    """``statement`` (its VALUES list as ``{}``) for ``rows``, in batches of :data:`_BATCH`."""
    for start in range(0, len(rows), _BATCH):
        batch = rows[start : start + _BATCH]
        width = len(batch[0])
        values = ", ".join(["(" + ", ".join(["%s"] * width) + ")"] * len(batch))
        conn.execute(statement.format(values), [v for row in batch for v in row])
