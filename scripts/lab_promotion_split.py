"""Where a promotion's CPU goes, per session (issue 24, promotion cost): the main thread's CPU
time (``time.thread_time``; the embedder's own threads are not in it) in the extractor, the
facts' embedding, the episodes (drafting and the store's batch insert, when the tree has them)
and the whole write, averaged over the sessions of LoCoMo conv-26. Run once per source tree:

    PYTHONPATH=/tmp/quipu-main/src .venv/bin/python scripts/lab_promotion_split.py
    PYTHONPATH=src .venv/bin/python scripts/lab_promotion_split.py
"""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import quipu.extraction.deterministic as det
import quipu.jobs.promotion as promo
from quipu.embeddings.local import LocalEmbedder
from quipu.evals import promotion_public as pp
from quipu.jobs.worker import Worker
from quipu.sessions import PROMOTE

LOCOMO = Path("/work/shared/data/locomo/locomo10.json")
spent: dict[str, float] = defaultdict(float)


def _timed(owner: Any, name: str, label: str) -> None:
    inner: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[label] += time.thread_time() - started

    setattr(owner, name, timed)


def main() -> None:
    _timed(det.DeterministicExtractor, "run", "extract")
    _timed(promo.Promoter, "_write", "write")
    _timed(promo.Promoter, "_write_episodes", "episodes")
    _timed(promo.Promoter, "_prefetched", "prefetch")
    try:  # the batch path (absent before issue 24's promotion-cost change)
        import quipu.memory_batch as batch
        from quipu.storage.sqlite.batch import BatchTables

        _timed(batch, "_draft", "episodes_draft")
        _timed(BatchTables, "insert_batch", "episodes_insert")
    except ImportError:
        pass
    embedder = LocalEmbedder()
    embedder.embed_batch(["warm up"])
    dialogue = pp._locomo_dialogues(LOCOMO, 1)[0]
    rt = pp._runtime(Path(tempfile.mkdtemp()) / "split.db", embedder, "new")
    for t in dialogue.turns:
        rt.sessions.append(pp._WHO, t.session_id, t.role, t.text, observed_at=t.at)
    only = Worker(rt.worker.queue, {PROMOTE: rt.worker.handlers[PROMOTE]})
    sessions = list(dict.fromkeys(t.session_id for t in dialogue.turns))
    spent.clear()
    started = time.thread_time()
    for sid in sessions:
        rt.sessions.promote(pp._WHO, sid)
        only.drain()
    total = time.thread_time() - started
    rt.close()
    shares = {k: round(v * 1000 / len(sessions), 1) for k, v in spent.items()}
    print({"cpu_ms_per_session": round(total * 1000 / len(sessions), 1), **shares})


if __name__ == "__main__":
    main()
