"""What a ``database`` value names, and credentials masked out of URLs and DSNs (API-5, OPS-1).

Pure functions, no I/O. A ``database`` value is one of three things:

- a file path (the embedded SQLite store);
- a ``postgresql://`` (or ``postgres://``) URL (the PostgreSQL store);
- an ``http://`` or ``https://`` URL: a Quipu server, which the CLI's memory verbs talk to
  with ``quipu.Client``; no store can be opened on it.

Anything else that starts like a URL (``ftp://…``, ``http:/x``, ``localhost:8750``) is refused,
never taken for a file name: a file whose name holds a colon is written ``./name:with:colons``.

:func:`mask_credentials` hides the secret parts of any text by their shape, whatever setting
holds it: a URL's userinfo (``user:***@`` or ``***@``) and a password, token or key in a
URL's query or a libpq keyword DSN (``password=***``).
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

DatabaseKind = Literal["file", "postgres", "server"]

MASK = "***"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")
_POSTGRES = ("postgresql", "postgres")
_SERVER = ("http", "https")
#: ``scheme://`` then the authority up to the first whitespace, ``?`` or ``#``: the userinfo is
#: everything before its last ``@``. A path holding ``@`` is masked too (safe side).
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^\s?#]*)@")
#: A password, token or key given as ``name=value`` in a URL query or a libpq keyword DSN.
_PARAM = re.compile(
    r"(?i)(?P<name>(?<![A-Za-z0-9_])(?:password|passwd|pwd|sslpassword|secret|token|"
    r"access_token|api_key|apikey|key|sig|signature)\s*=\s*)"
    r"(?P<value>'(?:[^'\\]|\\.)*'?|[^\s&#;]+)"
)


def database_kind(value: str) -> DatabaseKind:
    """Which store (or server) ``value`` names; ``ValueError`` saying why when it is none.

    The message never repeats a credential: the value is shown through
    :func:`mask_credentials`."""
    check_text(value)
    if not value.strip():
        raise ValueError("is empty")
    match = _SCHEME.match(value)
    if match is None or _DRIVE.match(value):
        return "file"
    scheme = match.group(1).lower()
    rest = value[match.end() :]
    shown = mask_credentials(value)
    if scheme in _POSTGRES:
        if not rest.startswith("//"):
            raise ValueError(f"{shown!r} is not a PostgreSQL URL: write postgresql://HOST/DB")
        return "postgres"
    if scheme in _SERVER:
        _check_server_url(value, rest, shown)
        return "server"
    raise ValueError(
        f"{shown!r}: the scheme {scheme}: names neither a file path nor a postgresql:// or "
        "http(s):// URL (a file whose name holds a colon is written ./NAME)"
    )


def normalise_database(value: str) -> str:
    """``value`` with a URL scheme in lower case (``POSTGRESQL://`` -> ``postgresql://``)."""
    match = _SCHEME.match(value)
    if match is None or _DRIVE.match(value):
        return value
    return match.group(1).lower() + value[match.end() - 1 :]


def _check_server_url(value: str, rest: str, shown: str) -> None:
    if not rest.startswith("//"):
        raise ValueError(f"{shown!r} is not a server URL: write http://HOST:PORT")
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in value):
        raise ValueError(f"{shown!r} holds a space or control character")
    parts = urlsplit(value)
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"{shown!r} carries credentials: give the API key in QUIPU_API_KEY, not in the URL"
        )
    if not parts.hostname:
        raise ValueError(f"{shown!r} has no host")
    try:
        parts.port  # noqa: B018 - raises ValueError on a port out of range or not a number
    except ValueError:
        raise ValueError(f"{shown!r} has an invalid port") from None
    if parts.query or parts.fragment:
        raise ValueError(f"{shown!r}: a server URL takes no query or fragment")


def check_text(value: str) -> None:
    """``ValueError`` unless ``value`` is valid Unicode text without NUL (no lone surrogate)."""
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("is not valid Unicode (a lone surrogate)") from None


def mask_credentials(text: str) -> str:
    """``text`` with every credential-shaped part replaced by ``***``: a URL's userinfo (the
    password, or the whole userinfo when it has no password, since then the user part may be
    a token) and password/token/key parameters of a URL query or a keyword DSN."""
    text = _USERINFO.sub(_mask_userinfo, text)
    return _PARAM.sub(lambda m: m.group("name") + MASK, text)


def _mask_userinfo(match: re.Match[str]) -> str:
    user, colon, _password = match.group("userinfo").partition(":")
    if colon and user:
        return f"{match.group('scheme')}{user}:{MASK}@"
    return f"{match.group('scheme')}{MASK}@"
