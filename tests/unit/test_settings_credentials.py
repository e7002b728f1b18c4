"""Settings (API-5, OPS-1): what a ``database`` value names, and credentials masked by their
type wherever settings are shown (issue 20 defect 15)."""

from __future__ import annotations

import pytest

from quipu.composition import database_kind, load_settings
from quipu.core.urls import mask_credentials
from quipu.errors import ConfigurationError
from quipu.settings import Settings, is_secret


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("./quipu-data/quipu.db", "file"),
        ("quipu.db", "file"),
        ("/var/lib/quipu/agent.db", "file"),
        ("./notes:v2.db", "file"),
        (":memory:", "file"),
        ("C:\\quipu\\agent.db", "file"),
        ("postgresql://quipu@localhost/quipu", "postgres"),
        ("postgres://u:pw@db.internal:5432/q?sslmode=require", "postgres"),
        ("http://127.0.0.1:8750", "server"),
        ("https://memory.example.com/quipu", "server"),
        ("HTTP://127.0.0.1:8750", "server"),
    ],
)
def test_api_005_database_kinds(value: str, kind: str) -> None:
    assert database_kind(value) == kind


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("http:/x", "not a server URL"),
        ("https:x", "not a server URL"),
        ("postgresql:quipu", "not a PostgreSQL URL"),
        ("ftp://host/quipu.db", "scheme ftp:"),
        ("file:quipu.db", "scheme file:"),
        ("localhost:8750", "scheme localhost:"),
        ("sqlite:///quipu.db", "scheme sqlite:"),
        ("http://", "no host"),
        ("http://:8750", "no host"),
        ("http://host:99999", "invalid port"),
        ("http://host:port", "invalid port"),
        ("http://host/?key=1", "no query"),
        ("http://host/#x", "no query"),
        ("http://ho st", "space or control"),
        ("http://host\n", "space or control"),
        ("http://alice:pw@host", "carries credentials"),
        ("http://host\x00", "NUL"),
        ("quipu\x00.db", "NUL"),
        ("http://\ud800", "lone surrogate"),
        ("quipu-\udcff.db", "lone surrogate"),
        ("", "empty"),
        ("   ", "empty"),
    ],
)
def test_api_005_database_values_that_name_nothing_are_refused(value: str, says: str) -> None:
    """Issue 20 defect 15: a value that is neither a path nor a known URL is refused, never
    taken for a file under a folder named after its scheme."""
    with pytest.raises(ConfigurationError, match=says):
        database_kind(value)
    with pytest.raises(ConfigurationError, match="database"):
        load_settings({"database": value}, environ={})


def test_api_005_refusals_never_echo_a_password() -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_settings({"database": "http://alice:hunter2@host"}, environ={})
    assert "hunter2" not in str(caught.value)
    with pytest.raises(ConfigurationError) as caught:
        load_settings({"database": "postgresql:hunter2"}, environ={})
    assert "postgresql:" in str(caught.value)
    with pytest.raises(ConfigurationError) as caught:
        load_settings({"database": "http://host", "max_k": "hunter2"}, environ={})
    assert "hunter2" not in str(caught.value)


def test_api_005_a_postgresql_scheme_must_be_lower_case() -> None:
    """libpq reads only ``postgresql://`` and ``postgres://``: an upper-case scheme would be a
    file name to the SQLite store, so it is refused."""
    with pytest.raises(ConfigurationError, match="write postgresql://"):
        load_settings({"database": "POSTGRESQL://u@h/db"}, environ={})


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgresql://quipu:hunter2@db/quipu", "postgresql://quipu:***@db/quipu"),
        ("postgresql://quipu:p@ss/w@rd@db/quipu", "postgresql://quipu:***@db/quipu"),
        ("postgres://ghp_token123@db/q", "postgres://***@db/q"),
        ("postgresql://db/quipu?password=hunter2&sslmode=require", None),
        (
            "host=db dbname=quipu password=hunter2 user=q",
            "host=db dbname=quipu password=*** user=q",
        ),
        ("host=db password='hunter 2' user=q", "host=db password=*** user=q"),
        ("http://bob:hunter2@llm.internal/v1", "http://bob:***@llm.internal/v1"),
        ("https://api.example/v1?api_key=hunter2", "https://api.example/v1?api_key=***"),
        ("see postgresql://a:hunter2@x/y and http://b:hunter2@z", None),
        ("./quipu-data/quipu.db", "./quipu-data/quipu.db"),
        ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1"),
        ("sslkey=/etc/quipu/client.key", "sslkey=/etc/quipu/client.key"),
    ],
)
def test_ops_001_credentials_are_masked_by_their_shape(text: str, shown: str | None) -> None:
    masked = mask_credentials(text)
    assert "hunter2" not in masked and "hunter 2" not in masked
    assert "ghp_token123" not in masked
    if shown is not None:
        assert masked == shown


def test_ops_001_api_keys_are_secret_by_type_not_by_name() -> None:
    secret = {name for name in Settings.model_fields if is_secret(name)}
    assert secret == {"embedding_api_key", "extractor_api_key"}


def test_ops_001_redacted_settings_and_repr_hide_every_credential() -> None:
    """Issue 20 defect 15: printed or logged settings never hold a password or a key."""
    settings = load_settings(
        {
            "database": "postgresql://quipu:hunter2@db.internal/quipu",
            "embedder": "openai",
            "embedding_base_url": "http://bob:hunter3@vectors.internal/v1",
            "embedding_model": "m",
            "embedding_dimension": 8,
            "embedding_api_key": "sk-live-hunter4",
            "extractor": "model",
            "extractor_base_url": "http://llm.internal/v1?token=hunter5",
            "extractor_model": "m",
            "extractor_api_key": "sk-live-hunter6",
        },
        environ={},
    )
    shown = settings.redacted()
    for text in (str(shown), repr(settings), str(settings)):
        for n in range(2, 7):
            assert f"hunter{n}" not in text, text
    assert shown["database"] == "postgresql://quipu:***@db.internal/quipu"
    assert shown["embedding_api_key"] == "***"
    assert shown["embedding_model"] == "m"
    # the values themselves are untouched: the service still connects with them
    assert settings.embedding_api_key == "sk-live-hunter4"
    assert "hunter2" in settings.database


@pytest.mark.parametrize("name", ["local_tenant", "reranker", "extractor_model", "host"])
@pytest.mark.parametrize("bad", ["a\x00b", "a\ud800b"])
def test_api_005_text_settings_refuse_nul_and_lone_surrogates(name: str, bad: str) -> None:
    with pytest.raises(ConfigurationError, match=name):
        load_settings({name: bad}, environ={})
