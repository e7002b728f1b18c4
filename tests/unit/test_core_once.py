"""Once: the lazy, thread-safe loading the local embedder and the reranker share."""

from __future__ import annotations

import threading
import time

import pytest

from quipu.core.once import Once


def test_the_value_is_built_once_however_many_threads_ask() -> None:
    calls: list[int] = []

    def build() -> int:
        calls.append(1)
        time.sleep(0.05)  # long enough for every thread to arrive while the first builds
        return 42

    once = Once(build)
    seen: list[int] = []
    threads = [threading.Thread(target=lambda: seen.append(once.get())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [42] * 8
    assert len(calls) == 1


def test_a_build_that_fails_is_tried_again() -> None:
    attempts: list[int] = []

    def build() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("model file missing")
        return "loaded"

    once = Once(build)
    with pytest.raises(RuntimeError):
        once.get()
    assert once.get() == "loaded"
    assert once.get() == "loaded"
    assert len(attempts) == 2
