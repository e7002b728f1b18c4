"""The curated public surface is pinned: changing it is a deliberate act."""

import quipu

EXPECTED = [
    "AsyncClient",
    "Client",
    "Closed",
    "ConfigurationError",
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
    "PayloadTooLarge",
    "PreconditionRequired",
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
    "Unauthorized",
    "Unavailable",
    "WriteResult",
    "__version__",
    "open",
]


def test_api_001_all_is_pinned() -> None:
    assert sorted(quipu.__all__) == sorted(EXPECTED)
    for name in quipu.__all__:
        assert hasattr(quipu, name)


def test_api_001_every_error_a_client_raises_is_exported() -> None:
    """A caller catches ``quipu.Unauthorized`` as it catches ``quipu.NotFound``: every public
    error class of quipu.errors is a name of the package."""
    import inspect

    from quipu import errors

    classes = {
        name
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.QuipuError) and not name.startswith("_")
    }
    assert classes <= set(quipu.__all__), classes - set(quipu.__all__)
    assert quipu.Unauthorized is errors.Unauthorized


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
