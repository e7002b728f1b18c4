"""Every erase path against every kind of legal hold, on every backend (LIFE-4).

The erase paths are read from the code: each is marked ``@erase_path`` and so listed in
:data:`quipu.governance.holds.ERASE_PATHS`, and a test fails for any use case named like an
erase that is not, so a new plane's erase cannot skip the one hold check. For each path and
each hold kind the matrix says whether the hold covers the erase: a covering hold gives 409
``legal_hold`` and changes nothing — the target, and what other planes derived from it (a
graduated article, graph facts, usage rows) — and once released the same erase goes through.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import quipu
from quipu.composition import build_runtime, load_settings
from quipu.core.records import Principal, Role
from quipu.documents import DocumentService
from quipu.errors import Conflict
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.governance import GovernanceService
from quipu.governance.holds import ERASE_PATHS
from quipu.graph.service import GraphService
from quipu.knowledge import KnowledgeService
from quipu.kv import KeyValueService
from quipu.memories import MemoryService
from quipu.usage import Graduation, UsageRecorder

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops")
WORD = "Zqxholdword"
HOLD_KINDS = ("memory", "subject", "tenant")
#: Which hold kinds cover which erase path: a memory hold holds that memory and what was
#: derived from it (the subject's erasure includes it), never a key or a document.
COVERS = {
    "memory": {"memory", "subject", "tenant"},
    "subject": {"memory", "subject", "tenant"},
    "knowledge": {"memory", "subject", "tenant"},
    "kv": {"subject", "tenant"},
    "documents": {"subject", "tenant"},
}


def _all_modules() -> None:
    for info in pkgutil.walk_packages(quipu.__path__, "quipu."):
        if ".evals" in info.name or info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)


def _erase_use_cases() -> set[str]:
    """Every method of a quipu class named like an erase whose first argument is a
    principal: a use case that erases (clients, which take no principal, call these)."""
    _all_modules()
    found = set()
    for name, module in list(__import__("sys").modules.items()):
        if not name.startswith("quipu.") or ".evals" in name:
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != name:
                continue
            for attr, fn in vars(cls).items():
                if not (attr == "erase" or attr.startswith("erase_") or attr.endswith("_erase")):
                    continue
                if not callable(fn) or attr.startswith("_"):
                    continue
                params = list(inspect.signature(fn).parameters)
                if len(params) > 1 and params[1] == "principal":
                    found.add(f"{name}.{cls.__qualname__}.{attr}")
    return found


def test_life_004_every_erase_use_case_takes_the_one_hold_check() -> None:
    assert _erase_use_cases() == set(ERASE_PATHS)
    assert set(ERASE_PATHS.values()) == set(COVERS)


@dataclass
class World:
    rt: Any
    service: MemoryService
    gov: GovernanceService
    kv: KeyValueService
    docs: DocumentService
    knowledge: KnowledgeService
    memory_id: str
    article_id: str
    document_id: str

    def dump(self) -> str:
        """What an erase would change, derived data included, as one text."""
        store, alice = self.service.store, _alice()
        parts: list[Any] = [m.to_dict() for m in self.service.history(alice, self.memory_id)]
        parts.append(self.knowledge.get(ADMIN, self.article_id).to_dict())
        parts.append([e.to_dict() for e in self.kv.history(alice, "seat", scope="user")])
        parts.append(self.docs.get(alice, self.document_id, scope="user").to_dict())
        parts.append(len(store.usage_events("t1", self.memory_id)))
        assert self.service.graph is not None
        parts.append(self.service.graph.facts(alice, f"{WORD} Station", scope="user").to_dict())
        return json.dumps(parts, sort_keys=True, default=str)


def _alice() -> Principal:
    return Principal("t1", "key-alice", Role.AGENT, agent_id="alice", user_id="u-alice")


@pytest.fixture
def world(service: MemoryService) -> Iterator[World]:
    rt = build_runtime(
        load_settings({"database": "unused.db"}, environ={}),
        service,
        extractor=DeterministicExtractor(),
    )
    service.graph = GraphService(service)
    alice = _alice()
    recorder = UsageRecorder(service.store, service.embedder)
    service.usage = recorder
    m = service.remember(alice, f"Alice takes the night train from {WORD} Station", scope="user")
    service.recall(alice, "which train does Alice take?", scope="user")
    recorder.flush()
    recorder.close()
    service.usage = None
    knowledge = KnowledgeService(service)
    article = Graduation(knowledge).graduate(alice, m.memory.id).article["id"]
    kv, docs = KeyValueService(service), DocumentService(service)
    kv.set(alice, "seat", f"{WORD} window", scope="user")
    doc = docs.add(alice, f"{WORD} travel notes for the winter.", title="notes", scope="user")
    yield World(
        rt,
        service,
        rt.governance,
        kv,
        docs,
        knowledge,
        m.memory.id,
        article,
        doc["document"]["id"],
    )
    rt.close()


def _erase(world: World, plane: str) -> Callable[[], object]:
    gov = world.gov
    if plane == "memory":
        return lambda: gov.erase(ADMIN, world.memory_id, reason="request 7")
    if plane == "subject":
        # the job is queued before the hold: what is tested is the check of its batches
        queued, _ = gov.erase_subject(ADMIN, "u-alice", reason="request 7")

        def subject() -> object:
            job = queued
            if gov.erasure_job(ADMIN, job.job_id).status.value == "failed":
                job, _ = gov.erase_subject(ADMIN, "u-alice", reason="request 7")
            world.rt.worker.drain()
            done = gov.erasure_job(ADMIN, job.job_id)
            if done.status.value != "succeeded":
                raise Conflict(str(done.last_error), code="legal_hold")
            return done

        return subject
    if plane == "kv":
        return lambda: world.kv.erase(ADMIN_OF_ALICE, "seat", scope="user", reason="request 7")
    if plane == "documents":
        return lambda: world.docs.erase(
            ADMIN_OF_ALICE, world.document_id, scope="user", reason="request 7"
        )
    assert plane == "knowledge"
    return lambda: world.knowledge.erase(ADMIN, world.article_id, reason="request 7")


ADMIN_OF_ALICE = Principal("t1", "key-admin", Role.ADMIN, agent_id="alice", user_id="u-alice")


def _target(world: World, kind: str) -> str | None:
    return {"memory": world.memory_id, "subject": "u-alice", "tenant": None}[kind]


@pytest.mark.parametrize("kind", HOLD_KINDS)
@pytest.mark.parametrize("plane", sorted(COVERS))
def test_life_004_a_covering_hold_stops_every_erase_path_and_changes_nothing(
    world: World, plane: str, kind: str
) -> None:
    erase = _erase(world, plane)
    hold = world.gov.hold(ADMIN, kind, _target(world, kind), reason="litigation 12")
    before = world.dump()
    if kind not in COVERS[plane]:
        erase()  # not covered: the erase goes through under the hold
        return
    with pytest.raises(Conflict) as refused:
        erase()
    assert "legal_hold" in (refused.value.code + str(refused.value))
    assert world.dump() == before  # the target and everything derived from it
    world.gov.release_hold(ADMIN, hold.hold_id, reason="case closed")
    erase()  # released: the same erase goes through
