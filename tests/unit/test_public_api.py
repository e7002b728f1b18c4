"""The curated public surface is pinned: changing it is a deliberate act."""

import quipu

EXPECTED = [
    "AsyncClient",
    "Client",
    "Conflict",
    "EmbeddingUnavailable",
    "Filters",
    "Forbidden",
    "Hit",
    "InvalidInput",
    "Kind",
    "LimitExceeded",
    "MemoryClient",
    "MemoryVersion",
    "NotFound",
    "Page",
    "Principal",
    "Provenance",
    "Quipu",
    "QuipuError",
    "RecallResult",
    "Role",
    "Scope",
    "SecretDetected",
    "SessionClient",
    "Settings",
    "Source",
    "Status",
    "Trust",
    "Unavailable",
    "WriteResult",
    "__version__",
    "open",
]


def test_api_001_all_is_pinned() -> None:
    assert sorted(quipu.__all__) == sorted(EXPECTED)
    for name in quipu.__all__:
        assert hasattr(quipu, name)


def test_api_001_open_gives_every_verb() -> None:
    verbs = {
        "remember",
        "recall",
        "get",
        "list",
        "history",
        "revise",
        "supersede",
        "forget",
        "set_status",
        "export",
        "import_",
        "embed_pending",
        "close",
    }
    assert verbs <= set(dir(quipu.Quipu))
