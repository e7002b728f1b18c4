"""The one boundary every stored record crosses (issue 20, SAFE-1, SAFE-5).

Both backends call these checks first in each write method, so whatever built the record (an
HTTP or MCP request, the library, the CLI, an import, a promotion job, an audit reason) it cannot
reach the database holding a string that breaks a later read (NUL, a lone surrogate), JSON nested
past the bound, or a secret. The checks walk every field of the record
(:func:`quipu.core.validate.stored_strings`), so a field added later is covered without anyone
remembering to add it here. Only fields holding machine values — ids, digests, model ids, times —
skip the secret screen (:data:`MACHINE_FIELDS`); every other string is screened, metadata keys
included.

The use cases check the same rules earlier, with friendlier messages and before any embedding is
spent; these checks are the guarantee, not the first line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from quipu.core import validate
from quipu.core.records import MemoryVersion
from quipu.safety import (
    find_secrets,
    find_secrets_in_value,
    looks_like_injection,
    secret_error,
)

_CLEAN: OrderedDict[bytes, None] = OrderedDict()
_CLEAN_LOCK = threading.Lock()
_CLEAN_SIZE = 4096
#: Per thread, while :func:`verdicts` is open: id(record) -> (record, its screened strings).
_VERDICTS = threading.local()

Exported = tuple[MemoryVersion, Any]
"""A version and its vector, as export writes and import reads them."""

#: Last path segments whose values are machine-made (ids, digests, model names, actors): checked
#: for valid Unicode like every string, but not screened for secrets.
MACHINE_FIELDS = frozenset(
    {
        "id",
        "tenant_id",
        "scope",
        "owner",
        "kind",
        "status",
        "source",
        "trust",
        "relation",
        "content_hash",
        "embedding_model",
        "actor",
        "actor_key",
        "key_id",
        "parent_key_id",
        "related_id",
        "surface",
        "agent_id",
        "user_id",
        "judged_by",
        "verdict",
        "target",
        "hold_id",
        "snapshot_id",
        "project_id",
        "role",
        "action",
        "target_ids",
        "grants",
    }
)


def admit(record: object) -> None:
    """Refuse ``record`` — a version, a change, an audit event, a credential, a tenant —
    when any string inside it cannot be stored or, outside machine fields, holds a secret.
    Raises :class:`~quipu.errors.InvalidInput` or :class:`~quipu.errors.SecretDetected`
    naming the field's path."""
    memo: dict[int, tuple[object, list[tuple[str, str]]]] | None = getattr(_VERDICTS, "memo", None)
    if memo is not None and (seen := memo.get(id(record))) is not None and seen[0] is record:
        return  # admitted in this block already: the same object, frozen, not walked again
    strings = list(validate.stored_strings(record))
    _screen(strings)
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        for item in dataclasses.fields(record):
            _screen_json(getattr(record, item.name), item.name)
    if memo is not None:
        memo[id(record)] = (record, [(p, v) for p, v in strings if v and _screened(p)])


@contextmanager
def verdicts() -> Iterator[None]:
    """For the block, on this thread, a record admitted once is not screened again when the
    same object is admitted a second time (the use case screens a write before it spends an
    embedding, the store again when it writes), and :func:`free_text` answers from that one
    walk (issue 24, promotion cost: a batch of episodes was screened three times per row).
    Only the very object is remembered (held, so its id is not reused); records are frozen
    dataclasses. Nested blocks share the outer one's verdicts."""
    if getattr(_VERDICTS, "memo", None) is not None:
        yield
        return
    _VERDICTS.memo = {}
    _VERDICTS.injected = {}
    try:
        yield
    finally:
        _VERDICTS.memo = None
        _VERDICTS.injected = None


def injected(text: str) -> bool:
    """:func:`~quipu.safety.looks_like_injection`, its verdict per text kept while
    :func:`verdicts` is open on this thread (a batch's rows share their session id, role…)."""
    memo: dict[str, bool] | None = getattr(_VERDICTS, "injected", None)
    if memo is None:
        return looks_like_injection(text)
    found = memo.get(text)
    if found is None:
        found = memo[text] = looks_like_injection(text)
    return found


def admit_versions(items: Iterable[Exported]) -> Iterator[Exported]:
    """``items`` (an import), each version admitted as it passes."""
    for memory, vector in items:
        admit(memory)
        yield memory, vector


def admit_turn(content: str, metadata: Mapping[str, Any]) -> None:
    """Refuse a session turn whose content or metadata cannot be stored or holds a secret."""
    validate.json_value(dict(metadata), field="metadata")
    _screen(validate.stored_strings({"content": content, "metadata": metadata}))
    _screen_json(metadata, "metadata")


def _screen_json(value: object, field: str) -> None:
    """A JSON value read as JSON: beside the spans any detector finds in its strings, a value
    under a key that names a credential (``{"password": "hunter2hunter2"}``) is a secret even
    though neither string is one alone."""
    if isinstance(value, Mapping) and value:
        findings = find_secrets_in_value(dict(value), field=field)
        if findings:
            error = secret_error(findings)
            error.details["field"] = findings[0].field
            raise error


def free_text(record: object) -> list[tuple[str, str]]:
    """The strings of ``record`` the screens read, with their paths: everything but machine
    fields (see the module docstring)."""
    memo: dict[int, tuple[object, list[tuple[str, str]]]] | None = getattr(_VERDICTS, "memo", None)
    if memo is not None and (seen := memo.get(id(record))) is not None and seen[0] is record:
        return list(seen[1])
    return [(p, v) for p, v in validate.stored_strings(record) if v and _screened(p)]


def _screen(strings: Iterable[tuple[str, str]]) -> None:
    """Scan each screened string, once per distinct text: a text screened clean before (by
    this check or by :func:`clean_text`) is not scanned again. A record is refused when one of
    its fields alone holds a secret, named by its path."""
    screened = [(path, value) for path, value in strings if value and _screened(path)]
    for path, value in screened:
        if clean_text(value):
            continue
        findings = find_secrets(value)
        if findings:
            error = secret_error(findings)
            shown = path
            for found in findings:  # a metadata key can be the secret: never echo it
                shown = shown.replace(value[found.start : found.end], "<secret>")
            error.details["field"] = shown
            raise error


def clean_text(text: str) -> bool:
    """Whether ``text`` holds no secret. A use case screens a record before it spends an
    embedding on it, and the store screens the same record again when it writes: the digests of
    recently screened clean texts (never the texts, never a secret's) spare the second scan."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
    with _CLEAN_LOCK:
        if digest in _CLEAN:
            _CLEAN.move_to_end(digest)
            return True
    if find_secrets(text):
        return False
    with _CLEAN_LOCK:
        _CLEAN[digest] = None
        if len(_CLEAN) > _CLEAN_SIZE:
            _CLEAN.popitem(last=False)
    return True


def _screened(path: str) -> bool:
    """Every string inside JSON values is screened; elsewhere, all but machine fields."""
    if path.startswith(("metadata", "details", "payload", "value")):
        return True
    return path.rsplit(".", 1)[-1].split("[", 1)[0] not in MACHINE_FIELDS
