"""URLs in settings, as text (API-5, OPS-1; issue 20 defect 15). Pure functions, no I/O.

- :func:`url_scheme`: whether a value starts like a URL, and with which scheme; a path
  (including a Windows drive, ``C:\\…``) has none. Which schemes name a store is the
  composition root's business (``composition.database_kind``).
- :func:`check_server_url`: an ``http(s)://`` URL a client can be pointed at.
- :func:`mask_credentials`: the secret parts of any text hidden by their shape, whatever
  setting holds it: a URL's userinfo (``user:***@`` or ``***@``) and a password, token or key
  in a URL's query or a libpq keyword DSN (``password=***``).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

MASK = "***"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")
#: ``scheme://`` then the authority up to the first whitespace, ``?`` or ``#``: the userinfo is
#: everything before its last ``@``. A path holding ``@`` is masked too (safe side).
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^\s?#]*)@")
#: A password, token or key given as ``name=value`` in a URL query or a libpq keyword DSN.
_PARAM = re.compile(
    r"(?i)(?P<name>(?<![A-Za-z0-9_])(?:password|passwd|pwd|sslpassword|secret|token|"
    r"access_token|api_key|apikey|key|sig|signature)\s*=\s*)"
    r"(?P<value>'(?:[^'\\]|\\.)*'?|[^\s&#;]+)"
)


def url_scheme(value: str) -> str | None:
    """The scheme, in lower case, of a value that starts like a URL (``name:``); None for a
    path, including a Windows drive letter (``C:\\…``)."""
    match = _SCHEME.match(value)
    if match is None or _DRIVE.match(value):
        return None
    return match.group(1).lower()


def check_server_url(value: str) -> None:
    """``ValueError`` unless ``value`` is an ``http(s)://HOST[:PORT][/PATH]`` URL without
    credentials, query, fragment, spaces or control characters. The message shows the value
    through :func:`mask_credentials`."""
    shown = mask_credentials(value)
    if url_scheme(value) not in ("http", "https") or not value.split(":", 1)[1].startswith("//"):
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
