"""An in-process search index for one scope partition, kept beside the SQLite file:
exact vectors and BM25 postings over the same row positions.

Brute-force cosine over a float32 matrix is exact at any size (~8 ms for 100k x 384 here); an
ANN index would trade exactness (RECALL-5) for speed we do not need at that size. BM25 uses the
scope's own statistics. Every filter that can be vectorised is applied as a mask *before* the
top-k cut, so a filter never starves the page. Tags are re-checked by the caller on loaded rows.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from quipu.core.lifecycle import HIDDEN
from quipu.core.query import Candidate, Filters
from quipu.core.records import Kind, Source, Status
from quipu.retrieval.bm25 import Postings, PostingsArrays
from quipu.storage.sqlite.scope_index_window import Memo, TimeOrder, remember, unwindowed
from quipu.storage.sqlite.vectors import Vectors
from quipu.storage.timecodec import FOREVER, to_micros

STATUS_CODES = {s: i for i, s in enumerate(Status)}
STATUS_BY_NAME = {s.value: i for i, s in enumerate(Status)}
KIND_BY_NAME = {k.value: i for i, k in enumerate(Kind)}
SOURCE_BY_NAME = {s.value: i for i, s in enumerate(Source)}
#: Column order of :meth:`ScopeIndex.bulk_load` rows.
BULK_COLUMNS = (
    "key",
    "family",
    "is_current",
    "status",
    "valid_at",
    "valid_to",
    "observed_at",
    "kind",
    "source",
    "confidence",
    "project",
    "terms",
    "session",
    "vector",
)
KIND_CODES = {k: i for i, k in enumerate(Kind)}
SOURCE_CODES = {s: i for i, s in enumerate(Source)}
#: Bytes per row of an index outside its columns and vectors (postings, position and family
#: lookups), measured: ~1.7 MiB for a 1,000-row scope of 384-dimension vectors (issue 23).
ROW_OVERHEAD = 256
_HIDDEN_FAMILY = [STATUS_CODES[s] for s in sorted(HIDDEN)]


@dataclass
class Row:
    """What the index keeps of one version (everything but tags and text; its BM25 keys)."""

    key: int
    family: str
    version: int
    is_current: bool
    status: Status
    valid_at: int
    valid_to: int | None
    observed_at: int | None
    kind: Kind
    source: Source
    confidence: float
    project: str | None
    terms: list[str]
    session: str | None


#: The per-row arrays of an index, as :class:`IndexState` carries them.
COLUMNS = (
    "keys",
    "has_vec",
    "current",
    "status",
    "family_status",
    "valid_at",
    "valid_to",
    "observed",
    "observed_known",
    "kind",
    "source",
    "confidence",
    "project",
    "family",
)


@dataclass
class IndexState:
    """Everything a :class:`ScopeIndex` holds, as arrays and lists (what an index file keeps,
    :mod:`quipu.storage.sqlite.index_file`). ``vectors`` are row blocks in order."""

    dimension: int
    generation: int
    columns: dict[str, npt.NDArray[Any]]
    vectors: list[npt.NDArray[Any]]
    families: list[str]
    projects: list[str]
    sessions: dict[int, str]
    postings: PostingsArrays


#: A filter passing fewer than one row in this many is applied before scoring: only the rows
#: that pass are scored (a gather of their vectors costs more per row than the full product).
_NARROW = 8


class ScopeIndex:
    """Versions of one scope with their vectors; thread-safe, grown in place."""

    keys: npt.NDArray[Any]
    vectors: Vectors
    has_vec: npt.NDArray[Any]
    current: npt.NDArray[Any]
    status: npt.NDArray[Any]
    family_status: npt.NDArray[Any]
    valid_at: npt.NDArray[Any]
    valid_to: npt.NDArray[Any]
    observed: npt.NDArray[Any]
    observed_known: npt.NDArray[Any]
    kind: npt.NDArray[Any]
    source: npt.NDArray[Any]
    confidence: npt.NDArray[Any]
    project: npt.NDArray[Any]
    family: npt.NDArray[Any]

    def __init__(self, dimension: int, generation: int) -> None:
        self.dimension = dimension
        self.generation = generation
        self.lock = threading.RLock()
        self._n = 0
        self._cap = 0
        self._projects: dict[str, int] = {}
        self._position: dict[int, int] = {}
        self._families: list[str] = []  # family code -> id; its inverse is built on a write
        self._family_codes: dict[str, int] | None = {}
        self._sessions: dict[int, str] = {}  # key -> session id, for rows written in one
        self.postings = Postings()
        self.vectors = Vectors(dimension)
        self._alloc(64)
        # Search memos (issue 23, dated questions), valid while ``_version`` is: every change to
        # rows, vectors or postings bumps it.
        self._version = 0
        self._masks: Memo = {}  # filters without their window -> (version, from, until, mask)
        self._bm25: Memo = {}  # weighted query keys -> (rows, scores)
        self._near: Memo = {}  # query bytes -> (version, scores of every row)
        self._by_time = TimeOrder()  # for dated questions' windows

    def __len__(self) -> int:
        return self._n

    def nbytes(self) -> int:
        """Memory this index holds, estimated (the bound of a process's index cache, issue 23):
        its columns and vectors, and :data:`ROW_OVERHEAD` bytes a row of postings and lookups."""
        columns = self._cap * sum(int(a.itemsize) for a in self._columns())
        return columns + self._n * (self.dimension * 4 + ROW_OVERHEAD)

    def _columns(self) -> tuple[npt.NDArray[Any], ...]:
        return (
            self.keys, self.has_vec, self.current, self.status, self.family_status,
            self.valid_at, self.valid_to, self.observed, self.observed_known, self.kind,
            self.source, self.confidence, self.project, self.family,
        )  # fmt: skip

    def _alloc(self, cap: int) -> None:
        def grow(
            old: npt.NDArray[Any] | None, dtype: type, shape: tuple[int, ...]
        ) -> npt.NDArray[Any]:
            new: npt.NDArray[Any] = np.zeros(shape, dtype=dtype)
            if old is not None and self._n:
                new[: self._n] = old[: self._n]
            return new

        first = self._cap == 0
        self.keys = grow(None if first else self.keys, np.int64, (cap,))
        self.has_vec = grow(None if first else self.has_vec, np.bool_, (cap,))
        self.current = grow(None if first else self.current, np.bool_, (cap,))
        self.status = grow(None if first else self.status, np.int8, (cap,))
        self.family_status = grow(None if first else self.family_status, np.int8, (cap,))
        self.valid_at = grow(None if first else self.valid_at, np.int64, (cap,))
        self.valid_to = grow(None if first else self.valid_to, np.int64, (cap,))
        self.observed = grow(None if first else self.observed, np.int64, (cap,))
        self.observed_known = grow(None if first else self.observed_known, np.bool_, (cap,))
        self.kind = grow(None if first else self.kind, np.int8, (cap,))
        self.source = grow(None if first else self.source, np.int8, (cap,))
        self.confidence = grow(None if first else self.confidence, np.float32, (cap,))
        self.project = grow(None if first else self.project, np.int32, (cap,))
        self.family = grow(None if first else self.family, np.int32, (cap,))
        self._cap = cap

    # -- maintenance -------------------------------------------------------------------------
    def bulk_load(self, rows: Sequence[Sequence[Any]]) -> None:
        """Fill an empty index at once (the restart path), vectorised.

        Each row is laid out as :data:`BULK_COLUMNS` names; ``terms`` are the stored BM25 keys.
        """
        with self.lock:
            if self._n:
                raise ValueError("bulk_load needs an empty index")
            self._version += 1
            n = len(rows)
            self._alloc(max(64, n))
            if n == 0:
                return
            (
                keys,
                families,
                current,
                status,
                valid_at,
                valid_to,
                observed,
                kind,
                source,
                confidence,
                project,
                terms,
                sessions,
                vectors,
            ) = zip(*rows, strict=True)
            self._sessions = {k: s for k, s in zip(keys, sessions, strict=True) if s is not None}
            self._n = n
            self.keys[:n] = keys
            self.current[:n] = current
            self.status[:n] = [STATUS_BY_NAME[v] for v in status]
            self.valid_at[:n] = valid_at
            self.valid_to[:n] = [FOREVER if v is None else v for v in valid_to]
            self.observed_known[:n] = [v is not None for v in observed]
            self.observed[:n] = [v or 0 for v in observed]
            self.kind[:n] = [KIND_BY_NAME[v] for v in kind]
            self.source[:n] = [SOURCE_BY_NAME[v] for v in source]
            self.confidence[:n] = confidence
            self.project[:n] = [-1 if v is None else self._project_code(v) for v in project]
            width = self.dimension * 4
            present = [i for i, v in enumerate(vectors) if v is not None and len(v) == width]
            if present and self.dimension:
                packed = np.frombuffer(b"".join([vectors[i] for i in present]), dtype=np.float32)
                if len(present) == n:
                    # Keep the loaded bytes as the matrix (no 150 MB copy on the restart path).
                    self.vectors = Vectors(self.dimension, packed.reshape(n, self.dimension))
                else:
                    base = np.zeros((n, self.dimension), dtype=np.float32)
                    base[present] = packed.reshape(len(present), self.dimension)
                    self.vectors = Vectors(self.dimension, base)
                self.has_vec[present] = True
            self._position = dict(zip(keys, range(n), strict=True))
            ids = self._codes()
            for family in families:
                if family not in ids:
                    ids[family] = len(ids)
                    self._families.append(family)
            self.family[:n] = [ids[f] for f in families]
            codes = self.status[:n]
            family_code = {families[i]: codes[i] for i in np.flatnonzero(self.current[:n])}
            self.family_status[:n] = [family_code.get(f, -1) for f in families]
            self.postings.bulk_add([t.split() for t in terms])

    def state(self) -> IndexState:
        """A consistent copy of what the index holds (its vector base is shared, not copied)."""
        with self.lock:
            n = self._n
            return IndexState(
                dimension=self.dimension,
                generation=self.generation,
                columns={name: getattr(self, name)[:n].copy() for name in COLUMNS},
                vectors=self.vectors.parts(n) if self.dimension else [],
                families=list(self._families),
                projects=list(self._projects),
                sessions=dict(self._sessions),
                postings=self.postings.arrays(),
            )

    @classmethod
    def from_state(cls, state: IndexState) -> ScopeIndex:
        """An index over ``state``; its vectors are used as they are (a mapped file's
        read-only rows stay shared until one of them changes)."""
        index = cls(state.dimension, state.generation)
        n = int(state.columns["keys"].shape[0])
        index._alloc(max(64, n))
        for name in COLUMNS:
            getattr(index, name)[:n] = state.columns[name]
        index._n = n
        if state.dimension and state.vectors:
            index.vectors = Vectors(state.dimension, state.vectors[0])
        index._position = dict(zip(index.keys[:n].tolist(), range(n), strict=True))
        index._families = list(state.families)
        index._family_codes = None  # built on the first write (100k ids: ~0.1-0.3 s)
        index._projects = {project: i for i, project in enumerate(state.projects)}
        index._sessions = dict(state.sessions)
        index.postings = Postings.from_arrays(state.postings)
        return index

    def add(self, row: Row, vector: npt.NDArray[np.float32] | None) -> None:
        with self.lock:
            self._version += 1
            if self._n == self._cap:
                self._alloc(self._cap * 2)
            i = self._n
            self.keys[i] = row.key
            self.vectors.reserve(i + 1)
            if vector is not None:
                self.vectors.set(i, vector)
                self.has_vec[i] = True
            self.current[i] = row.is_current
            self.status[i] = STATUS_CODES[row.status]
            self.valid_at[i] = row.valid_at
            self.valid_to[i] = FOREVER if row.valid_to is None else row.valid_to
            self.observed_known[i] = row.observed_at is not None
            self.observed[i] = row.observed_at or 0
            self.kind[i] = KIND_CODES[row.kind]
            self.source[i] = SOURCE_CODES[row.source]
            self.confidence[i] = row.confidence
            self.project[i] = -1 if row.project is None else self._project_code(row.project)
            self._position[row.key] = i
            codes = self._codes()
            if row.family not in codes:
                codes[row.family] = len(self._families)
                self._families.append(row.family)
            self.family[i] = codes[row.family]
            self.postings.add(i, row.terms)
            if row.session is not None:
                self._sessions[row.key] = row.session
            self._n += 1
            if row.is_current:
                self._set_family_status(row.family, row.status)

    def retire(self, key: int, valid_to: int | None) -> None:
        """The version ``key`` stopped being current; its validity now ends at ``valid_to``."""
        with self.lock:
            i = self._position.get(key)
            if i is None:
                return
            self._version += 1
            self.current[i] = False
            self.valid_to[i] = FOREVER if valid_to is None else valid_to

    def set_vector(self, key: int, vector: npt.NDArray[np.float32]) -> None:
        with self.lock:
            i = self._position.get(key)
            if i is not None:
                self._version += 1
                self.vectors.set(i, vector)
                self.has_vec[i] = True

    def sessions_of(self, keys: Sequence[int]) -> dict[int, str]:
        with self.lock:
            return {k: self._sessions[k] for k in keys if k in self._sessions}

    def key_frequencies(self, keys: Sequence[str]) -> tuple[int, dict[str, int]]:
        """Rows of the keyword index, and how many hold each of ``keys`` (those none hold are
        left out)."""
        with self.lock:
            counts = {key: self.postings.document_frequency(key) for key in dict.fromkeys(keys)}
            return len(self.postings), {key: n for key, n in counts.items() if n}

    def vector_of(self, key: int) -> npt.NDArray[np.float32] | None:
        with self.lock:
            i = self._position.get(key)
            if i is None or not self.has_vec[i]:
                return None
            row: npt.NDArray[np.float32] = self.vectors.row(i).copy()
            return row

    def similarities(self, keys: Sequence[int], query: npt.NDArray[np.float32]) -> dict[int, float]:
        with self.lock:
            found = [(key, i) for key in keys if (i := self._position.get(key)) is not None]
            found = [(key, i) for key, i in found if self.has_vec[i]]
            if not found:
                return {}
            scores = (self.vectors.take([i for _, i in found]) @ query).tolist()
            return {key: score for (key, _), score in zip(found, scores, strict=True)}

    def _set_family_status(self, family: str, status: Status) -> None:
        code = STATUS_CODES[status]
        fid = self._codes().get(family)
        if fid is not None:
            self.family_status[: self._n][self.family[: self._n] == fid] = code

    def _codes(self) -> dict[str, int]:
        """Family id -> code (under the lock)."""
        if self._family_codes is None:
            self._family_codes = {family: i for i, family in enumerate(self._families)}
        return self._family_codes

    def _project_code(self, project: str) -> int:
        code = self._projects.get(project)
        if code is None:
            code = self._projects[project] = len(self._projects)
        return code

    # -- search ------------------------------------------------------------------------------
    def mask(self, filters: Filters, now_micros: int) -> npt.NDArray[np.bool_]:
        """Which rows pass the vectorisable filters, their observation window included."""
        m = self._passing(filters, now_micros, None)
        n = self._n
        if filters.observed_after is not None:
            m &= self.observed_known[:n] & (self.observed[:n] >= to_micros(filters.observed_after))
        if filters.observed_before is not None:
            m &= self.observed_known[:n] & (self.observed[:n] < to_micros(filters.observed_before))
        return m

    def _passing(
        self, filters: Filters, now_micros: int, rows: npt.NDArray[np.intp] | None
    ) -> npt.NDArray[np.bool_]:
        """Which of ``rows`` (every row when ``None``) pass the vectorisable filters but the
        observation window (a new array)."""
        n = self._n

        def at(column: npt.NDArray[Any]) -> npt.NDArray[Any]:
            return column[:n] if rows is None else column[rows]

        status = at(self.status)
        if filters.as_of is None:
            m = at(self.current).copy()
            m &= np.isin(status, [STATUS_CODES[s] for s in filters.statuses])
            instant = now_micros
        else:
            m = ~np.isin(at(self.family_status), _HIDDEN_FAMILY)
            m &= ~np.isin(status, _HIDDEN_FAMILY)
            instant = to_micros(filters.as_of)
        in_time = (at(self.valid_at) <= instant) & (instant < at(self.valid_to))
        if filters.as_of is None:
            # "now" bounds only active rows: a superseded or expired row asked for by status is
            # by definition no longer valid, and is still returned.
            in_time |= status != STATUS_CODES[Status.ACTIVE]
        m &= in_time
        project = -1 if filters.project is None else self._projects.get(filters.project, -2)
        codes = at(self.project)
        m &= (codes == -1) | (codes == project)
        if filters.kinds:
            m &= np.isin(at(self.kind), [KIND_CODES[k] for k in filters.kinds])
        if filters.sources:
            m &= np.isin(at(self.source), [SOURCE_CODES[s] for s in filters.sources])
        if filters.min_confidence is not None:
            m &= at(self.confidence) >= filters.min_confidence
        return m

    def _scope_mask(self, filters: Filters, now_micros: int) -> npt.NDArray[np.bool_]:
        """:meth:`_passing` over every row, kept for the recall's next searches (read-only:
        callers combine it into new arrays). Valid while no row changes and ``now`` crosses no
        row's validity bound."""
        key = unwindowed(filters)
        found = self._masks.get(key)
        if found is not None and found[0] == self._version and found[1] <= now_micros < found[2]:
            kept: npt.NDArray[np.bool_] = found[3]
            return kept
        m = self._passing(key, now_micros, None)
        remember(
            self._masks, key, (self._version, now_micros, self._stable_until(key, now_micros), m)
        )
        return m

    def _stable_until(self, filters: Filters, now_micros: int) -> int:
        """The first instant after ``now_micros`` at which a row enters or leaves its validity
        (the mask of ``filters`` holds until then); never for a mask read ``as_of``."""
        if filters.as_of is not None:
            return FOREVER
        n = self._n
        starts, ends = self.valid_at[:n], self.valid_to[:n]
        first_start = np.min(starts, where=starts > now_micros, initial=FOREVER)
        first_end = np.min(ends, where=ends > now_micros, initial=FOREVER)
        return int(min(first_start, first_end))

    def _passes(
        self, filters: Filters, now_micros: int, rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        """Which of ``rows`` pass the filters but the window: read from the scope's mask when
        an earlier search of the recall made it, else computed for those rows alone."""
        key = unwindowed(filters)
        found = self._masks.get(key)
        if found is not None and found[0] == self._version and found[1] <= now_micros < found[2]:
            kept: npt.NDArray[np.bool_] = found[3][rows]
            return kept
        return self._passing(key, now_micros, rows)

    def _window(self, filters: Filters) -> npt.NDArray[np.intp] | None:
        """The rows observed inside the filters' window, ascending; ``None`` when the filters
        name no window."""
        after, before = filters.observed_after, filters.observed_before
        if after is None and before is None:
            return None
        return self._by_time.rows(
            self.observed,
            self.observed_known,
            self._n,
            None if after is None else to_micros(after),
            None if before is None else to_micros(before),
        )

    def _scores(self, query: npt.NDArray[np.float32], n: int) -> npt.NDArray[np.float32]:
        """``row @ query`` for every row, kept for the recall's next search with that query."""
        key = query.tobytes()
        found = self._near.get(key)
        if found is not None and found[0] == self._version:
            kept: npt.NDArray[np.float32] = found[1]
            return kept
        scores = self.vectors.scores(query, n)
        remember(self._near, key, (self._version, scores))
        return scores

    def _bm25_scores(self, keys: Mapping[str, float]) -> npt.NDArray[np.float32] | None:
        """BM25 of every row for ``keys``, kept for the recall's next search with those keys
        (a dated question's window search scores the same keys)."""
        key = tuple(keys.items())
        rows = len(self.postings)
        found = self._bm25.get(key)
        if found is not None and found[0] == rows:
            kept: npt.NDArray[np.float32] | None = found[1]
            return kept
        scores = self.postings.scores(keys)
        remember(self._bm25, key, (rows, scores))
        return scores

    def allowed(self, keys: list[int], filters: Filters, now_micros: int) -> set[int]:
        """Which of ``keys`` pass the vectorisable filters (used to check full-text hits)."""
        with self.lock:
            m = self.mask(filters, now_micros)
            out = set()
            for key in keys:
                i = self._position.get(key)
                if i is not None and m[i]:
                    out.add(key)
            return out

    def search(
        self, query: npt.NDArray[np.float32], filters: Filters, limit: int, now_micros: int
    ) -> tuple[list[Candidate], int, str]:
        """Exact top-``limit`` by cosine among rows passing the filters; returns the rows
        scored and the plan (``exact-numpy``, ``exact-window``, ``window-empty``).

        The filters are applied first. A dated question's observation window (issue 23
        finding 1) is counted first from the rows ordered by time: an empty one costs nothing,
        and the other filters are checked on its rows only; when few rows pass, only their
        vectors are scored (``exact-window``), else the scope's scores are read (computed once
        per query)."""
        with self.lock:
            n = self._n
            if n == 0 or limit <= 0:
                return [], 0, "exact-numpy"
            rows = self._window(filters)
            if rows is None:
                idx = np.flatnonzero(self._scope_mask(filters, now_micros) & self.has_vec[:n])
            elif rows.size == 0:
                return [], 0, "window-empty"
            else:
                rows = rows[self.has_vec[rows]]
                idx = rows[self._passes(filters, now_micros, rows)]
            if idx.size == 0:
                return [], 0, "exact-numpy" if rows is None else "exact-window"
            if idx.size * _NARROW < n:
                found, scanned = self._top(self.vectors.take(idx) @ query, idx, limit)
                return found, scanned, "exact-numpy" if rows is None else "exact-window"
            return (*self._top(self._scores(query, n)[idx], idx, limit), "exact-numpy")

    def search_text(
        self, keys: Mapping[str, float], filters: Filters, limit: int, now_micros: int
    ) -> tuple[list[Candidate], int, str]:
        """Top-``limit`` by BM25 over the weighted query ``keys``
        (:func:`~quipu.retrieval.expansion.query_keys`) among rows passing the filters that
        hold one of them (no scoring at all when no row passes the filters); returns the rows
        that matched and the plan (``bm25-scope``, ``bm25-window``, ``window-empty``). A
        window's rows read the scope's scores for the same keys (computed once per query)."""
        with self.lock:
            n = self._n
            if n == 0 or limit <= 0:
                return [], 0, "bm25-scope"
            rows = self._window(filters)
            if rows is None:
                m = self._scope_mask(filters, now_micros)
                if not m.any():
                    return [], 0, "bm25-scope"
                scores = self._bm25_scores(keys)
                if scores is None:
                    return [], 0, "bm25-scope"
                idx = np.flatnonzero(m & (scores > 0))
                return (*self._top(scores[idx], idx, limit), "bm25-scope")
            if rows.size == 0:
                return [], 0, "window-empty"
            idx = rows[self._passes(filters, now_micros, rows)]
            scores = self._bm25_scores(keys) if idx.size else None
            if scores is None:
                return [], 0, "bm25-window"
            idx = idx[scores[idx] > 0]
            return (*self._top(scores[idx], idx, limit), "bm25-window")

    def _top(
        self, chosen: npt.NDArray[np.float32], idx: npt.NDArray[np.intp], limit: int
    ) -> tuple[list[Candidate], int]:
        """The ``limit`` best of rows ``idx`` scored ``chosen`` (ties on position)."""
        if idx.size == 0:
            return [], 0
        take = min(limit, idx.size)
        top = np.argpartition(-chosen, take - 1)[:take] if take < idx.size else np.arange(idx.size)
        top = top[np.lexsort((idx[top], -chosen[top]))]
        keys, values = self.keys[idx[top]].tolist(), chosen[top].tolist()  # no per-item numpy
        return [Candidate(k, v) for k, v in zip(keys, values, strict=True)], int(idx.size)
