"""The governance operations of the HTTP API (issue 22: LIFE-4..8, SCOPE-6, SCOPE-8, SAFE-4) as
:class:`~quipu.wire.Call` values, and their answers turned back into the domain types the
embedded client returns. Both HTTP clients send these (:mod:`quipu.remote_governance`), so each
operation is spelled once, as :mod:`quipu.wire` does for memories, sessions and jobs.

Answers carry no ``tenant_id`` (the server never discloses it), so the decoded holds,
snapshots and projects have the empty string there, as memories do.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote

from quipu.core import validate
from quipu.core.auth import AuditEvent
from quipu.core.governance import (
    EraseReport,
    Hold,
    HoldKind,
    Project,
    Snapshot,
    SnapshotMember,
    SubjectInfo,
)
from quipu.core.jobs import Job
from quipu.core.query import Page
from quipu.core.records import MemoryVersion, Scope
from quipu.governance import Erased, Resolved
from quipu.wire import Call, job_from_dict, job_path, memory_from_dict, memory_path, page_from_dict


def _segment(value: str, field: str) -> str:
    """One path segment from an id the caller gave (checked here: never a ``/`` or ``..``)."""
    return quote(validate.identifier(value, field=field), safe="")


# -- erase and legal holds (LIFE-4) ------------------------------------------------------------
def erase(memory_id: str, body: dict[str, Any]) -> Call[Erased]:
    return Call("POST", memory_path(memory_id) + "/erase", erased_from_dict, json=body)


def erase_subject(user_id: str, body: dict[str, Any]) -> Call[Job]:
    path = f"/v1/subjects/{_segment(user_id, 'user_id')}/erase"
    return Call("POST", path, lambda d: job_from_dict(d["job"]), json=body)


def erasure_job(job_id: str) -> Call[Job]:
    return Call("GET", f"/v1/erasures/{_segment(job_id, 'job_id')}", job_from_dict)


def hold(body: dict[str, Any]) -> Call[Hold]:
    return Call("POST", "/v1/holds", hold_from_dict, json=body)


def holds(params: dict[str, Any]) -> Call[list[Hold]]:
    def decode(data: Any) -> list[Hold]:
        return [hold_from_dict(h) for h in data["items"]]

    return Call("GET", "/v1/holds", decode, params=params)


def release_hold(hold_id: str, body: dict[str, Any]) -> Call[Hold]:
    path = f"/v1/holds/{_segment(hold_id, 'hold_id')}/release"
    return Call("POST", path, hold_from_dict, json=body)


# -- review, judgement, restore, merge (LIFE-5..7, MEM-3) --------------------------------------
def review_queue(params: dict[str, Any]) -> Call[Page]:
    return Call("GET", "/v1/review", page_from_dict, params=params)


def review(memory_id: str, body: dict[str, Any]) -> Call[MemoryVersion]:
    path = "/v1/review/" + _segment(memory_id, "id")
    return Call("POST", path, memory_from_dict, json=body)


def judge(memory_id: str, verdict: str, body: dict[str, Any]) -> Call[MemoryVersion]:
    """``verdict`` is ``affirm`` or ``refute``."""
    return Call("POST", f"{memory_path(memory_id)}/{verdict}", memory_from_dict, json=body)


def restore(memory_id: str, body: dict[str, Any]) -> Call[MemoryVersion]:
    return Call("POST", memory_path(memory_id) + "/restore", memory_from_dict, json=body)


def merge(body: dict[str, Any]) -> Call[MemoryVersion]:
    return Call("POST", "/v1/memories/merge", memory_from_dict, json=body)


# -- snapshots and projects (LIFE-8, SCOPE-6) --------------------------------------------------
def snapshot(body: dict[str, Any]) -> Call[Snapshot]:
    return Call("POST", "/v1/snapshots", snapshot_from_dict, json=body)


def resolve_snapshot(snapshot_id: str) -> Call[Resolved]:
    path = "/v1/snapshots/" + _segment(snapshot_id, "snapshot_id")
    return Call("GET", path, resolved_from_dict)


def create_project(body: dict[str, Any]) -> Call[Project]:
    return Call("POST", "/v1/projects", project_from_dict, json=body)


def projects() -> Call[list[Project]]:
    return Call("GET", "/v1/projects", lambda d: [project_from_dict(p) for p in d["items"]])


# -- the audit log, oversight and job control (SAFE-4, SCOPE-8) --------------------------------
def audit(params: dict[str, Any]) -> Call[tuple[list[AuditEvent], str | None]]:
    def decode(data: Any) -> tuple[list[AuditEvent], str | None]:
        return [audit_from_dict(e) for e in data["items"]], data["next_cursor"]

    return Call("GET", "/v1/audit", decode, params=params)


def subjects(params: dict[str, Any]) -> Call[tuple[list[SubjectInfo], str | None]]:
    def decode(data: Any) -> tuple[list[SubjectInfo], str | None]:
        return [subject_from_dict(s) for s in data["items"]], data["next_cursor"]

    return Call("GET", "/v1/admin/subjects", decode, params=params)


def oversight_list(params: dict[str, Any]) -> Call[Page]:
    return Call("GET", "/v1/admin/memories", page_from_dict, params=params)


def oversight_forget(memory_id: str, body: dict[str, Any]) -> Call[MemoryVersion]:
    """The reason travels in a body, never in a URL (issue 20 defect 4)."""
    path = f"/v1/admin/memories/{_segment(memory_id, 'id')}/forget"
    return Call("POST", path, memory_from_dict, json=body)


def cancel_job(job_id: str) -> Call[Job]:
    return Call("POST", job_path(job_id) + "/cancel", job_from_dict)


def retry_job(job_id: str) -> Call[Job]:
    return Call("POST", job_path(job_id) + "/retry", job_from_dict)


# -- answers -> domain types -------------------------------------------------------------------
def _when(value: Any) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def erased_from_dict(data: Mapping[str, Any]) -> Erased:
    tombstone = memory_from_dict(data["tombstone"])
    families = [tombstone.id] if int(data["families"]) else []
    counts = {str(k): int(v) for k, v in dict(data["counts"]).items()}
    return Erased(tombstone, EraseReport(families=families, counts=counts))


def hold_from_dict(data: Mapping[str, Any]) -> Hold:
    return Hold(
        tenant_id="",
        hold_id=str(data["hold_id"]),
        kind=HoldKind(data["kind"]),
        target=str(data["target"]),
        reason=str(data["reason"]),
        created_by=str(data["created_by"]),
        created_at=datetime.fromisoformat(data["created_at"]),
        released_by=data.get("released_by"),
        released_at=_when(data.get("released_at")),
        release_reason=data.get("release_reason"),
    )


def snapshot_from_dict(data: Mapping[str, Any]) -> Snapshot:
    return Snapshot(
        tenant_id="",
        snapshot_id=str(data["snapshot_id"]),
        label=data.get("label"),
        created_by=str(data["created_by"]),
        created_at=datetime.fromisoformat(data["created_at"]),
        members=tuple(SnapshotMember(str(m["id"]), int(m["version"])) for m in data["members"]),
    )


def resolved_from_dict(data: Mapping[str, Any]) -> Resolved:
    """Each member with its memory, or None and why it is withheld (never stale content)."""
    members = [
        (
            SnapshotMember(str(m["id"]), int(m["version"])),
            None if m.get("memory") is None else memory_from_dict(m["memory"]),
            m.get("withheld"),
        )
        for m in data["members"]
    ]
    pinned = {**data, "members": [{"id": m.id, "version": m.version} for m, _, _ in members]}
    return Resolved(snapshot_from_dict(pinned), members)


def project_from_dict(data: Mapping[str, Any]) -> Project:
    return Project(
        tenant_id="",
        project_id=str(data["project_id"]),
        name=data.get("name"),
        created_by=str(data["created_by"]),
        created_at=datetime.fromisoformat(data["created_at"]),
    )


def audit_from_dict(data: Mapping[str, Any]) -> AuditEvent:
    return AuditEvent(
        tenant_id=str(data["tenant_id"]),
        at=datetime.fromisoformat(data["at"]),
        actor_key=str(data["actor_key"]),
        surface=str(data["surface"]),
        action=str(data["action"]),
        target_ids=tuple(str(t) for t in data["target_ids"]),
        role=data.get("role"),
        agent_id=data.get("agent_id"),
        user_id=data.get("user_id"),
        reason=data.get("reason"),
        details=dict(data.get("details") or {}),
        seq=data.get("seq"),
    )


def subject_from_dict(data: Mapping[str, Any]) -> SubjectInfo:
    return SubjectInfo(Scope(data["scope"]), str(data["owner"]), int(data["live"]))
