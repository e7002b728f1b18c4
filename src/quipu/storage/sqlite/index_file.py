"""A scope's search index in a file beside the SQLite database, mapped by every process.

Loading a 100k-row scope from the database took 2.1-2.5 s per process and kept its own copy of
the float32 vectors in each (issue 23, finding 3). A process that built a scope's index writes
it to ``<database>-index/<digest>.scope``; the next process to open the scope maps the file
instead: its vectors and BM25 postings are read-only views of the mapping, shared by every
process through the page cache, and only the small per-row arrays are copied.

A file is used only when everything it was built from still holds: the same store (a random id
the store keeps in ``store_meta``), tenant, scope and owner, embedding model and dimension,
tokenizer version, and a generation not newer than the scope's; its last row must still be the
same version in the database (a restored backup is not taken for the store it replaced). A
file behind the scope's generation is brought up to date from ``scope_log`` like any index in
memory; one that cannot be is rebuilt and rewritten. Files are replaced atomically (written
aside, then renamed), so a reader maps either the old file or the new one, whole.

Layout: 8 bytes of magic, the header's length (8 bytes, little-endian), the header (JSON: what
the file was built from, the lists of strings, and each array's dtype, shape and offset), then
the arrays, each at an offset aligned to 64 bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quipu.core.records import ScopeRef
from quipu.retrieval.bm25 import PostingsArrays
from quipu.storage.sqlite.scope_index import COLUMNS, IndexState

log = logging.getLogger("quipu.storage")

MAGIC = b"QUIPUSI\x01"
_ALIGN = 64
_POSTINGS = ("ptr", "docs", "tfs", "lengths")


@dataclass(frozen=True)
class Origin:
    """What an index file was built from; a file whose origin differs is not used."""

    store_id: str
    tenant_id: str
    scope: str
    owner: str
    model: str
    dimension: int
    tokenizer: str


def file_for(folder: Path, ref: ScopeRef) -> Path:
    """The file of ``ref``'s index (a digest: no tenant or owner id in a file name)."""
    name = "\x1f".join((ref.tenant_id, ref.scope.value, ref.owner)).encode()
    return folder / f"{hashlib.sha256(name).hexdigest()[:40]}.scope"


def write(path: Path, origin: Origin, state: IndexState) -> int:
    """Write ``state`` to ``path`` atomically; returns the bytes written."""
    arrays: list[tuple[str, npt.NDArray[Any]]] = [(f"c.{n}", state.columns[n]) for n in COLUMNS]
    arrays += [(f"p.{n}", getattr(state.postings, n)) for n in _POSTINGS]
    rows = int(state.columns["keys"].shape[0])
    table: dict[str, Any] = {}
    offset = 0
    for name, array in arrays:
        offset = _aligned(offset)
        table[name] = [array.dtype.str, list(array.shape), offset]
        offset += array.nbytes
    offset = _aligned(offset)
    table["vectors"] = ["<f4", [rows, state.dimension], offset]
    end = offset + rows * state.dimension * 4
    header = json.dumps(
        {
            "origin": asdict(origin),
            "generation": state.generation,
            "families": state.families,
            "projects": state.projects,
            "sessions": [[k, v] for k, v in state.sessions.items()],
            "vocabulary": state.postings.vocabulary,
            "total_length": state.postings.total_length,
            "arrays": table,
            "bytes": end,
        }
    ).encode()
    start = _aligned(16 + len(header))
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    aside = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        with aside.open("wb") as f:
            f.write(MAGIC + len(header).to_bytes(8, "little") + header)
            for name, array in arrays:
                f.seek(start + table[name][2])
                f.write(np.ascontiguousarray(array).data)
            f.seek(start + table["vectors"][2])
            for block in state.vectors:
                f.write(np.ascontiguousarray(block, dtype=np.float32).data)
            f.truncate(start + end)
        os.replace(aside, path)
    except BaseException:
        aside.unlink(missing_ok=True)
        raise
    return start + end


def read(path: Path, origin: Origin) -> IndexState | None:
    """The index state in ``path``, its vectors and postings mapped read-only; ``None`` when
    there is no file, or it was built from something else, or it is not whole."""
    try:
        with path.open("rb") as f:
            lead = f.read(16)
            if len(lead) < 16 or lead[:8] != MAGIC:
                return None
            header = json.loads(f.read(int.from_bytes(lead[8:], "little")))
            if header.get("origin") != asdict(origin):
                return None
            start = _aligned(16 + int.from_bytes(lead[8:], "little"))
            if os.fstat(f.fileno()).st_size != start + int(header["bytes"]):
                log.info("index file %s is not whole; the scope is rebuilt", path.name)
                return None
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.info("index file %s unreadable (%s); the scope is rebuilt", path.name, exc)
        return None

    def view(name: str) -> npt.NDArray[Any]:
        dtype, shape, offset = header["arrays"][name]
        count = int(np.prod(shape))
        array = np.frombuffer(mapped, dtype=np.dtype(dtype), count=count, offset=start + offset)
        return array.reshape(shape)

    postings = PostingsArrays(
        vocabulary=list(header["vocabulary"]),
        ptr=view("p.ptr"),
        docs=view("p.docs"),
        tfs=view("p.tfs"),
        lengths=view("p.lengths"),
        total_length=float(header["total_length"]),
    )
    return IndexState(
        dimension=origin.dimension,
        generation=int(header["generation"]),
        columns={name: view(f"c.{name}") for name in COLUMNS},
        vectors=[view("vectors")],
        families=list(header["families"]),
        projects=list(header["projects"]),
        sessions={int(k): str(v) for k, v in header["sessions"]},
        postings=postings,
    )


def remove(path: Path) -> None:
    """Delete an index file (an erasure changed the rows it was built from)."""
    path.unlink(missing_ok=True)


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN
