"""Context rules: a value is a secret because of what names it.

``password = "..."``, ``the wifi password is ...``, ``mysql -pSECRET``, ``redis://:pw@host``,
``Authorization: Bearer ...``, an AWS secret key a sentence introduces. Each rule finds a
candidate value; :mod:`quipu.safety.secret_values` decides from the value itself whether it
is a credential or code, a placeholder or prose. Values are captured in lookaheads so one
value can itself start the next match. Every pattern starts behind a lookbehind or scans a
bounded distance, so the scan stays linear.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from quipu.safety.secret_values import (
    is_code_reference,
    is_placeholder,
    is_pointer,
    looks_random,
    password_value_is_secret,
    prose_password_is_secret,
    token_value_is_secret,
)

__all__ = ["Span", "context_spans", "key_kind"]

PASSWORD = "password_assignment"
API_KEY = "generic_api_key"


@dataclass(frozen=True)
class Span:
    kind: str
    start: int
    end: int


# A value after an operator: double, single, back or typographic quotes, or a bare run.
_VALUE = (
    r"(?=\\?\"(?P<dq>[^\"\\\n]{1,200}+)\\?\"|'(?P<sq>[^'\n]{1,200}+)'|`(?P<bq>[^`\n]{1,200}+)`"
    r"|[“”«](?P<tq>[^“”«»\n]{1,200}+)[“”»]|(?P<bare>[^\s\"'`,;&|<>“”«»]{1,200}+))"
)
# In prose a bare value runs to the next space: "Tr0ub4dor&3" is one password.
_PROSE_VALUE = _VALUE.replace("&|<>", "<>")
_QUOTED = ("dq", "sq", "bq", "tq")

# Matched where a key starts (found by walking back from its suffix, at most 60 chars).
_ASSIGNMENT = re.compile(
    r"(?P<key>[A-Za-z0-9_\-.]{1,120}+)(?:\\?[\"'`])?\]?"
    # an optional type annotation before "=": password: str = "...", password?: string = ...
    r"(?:[ \t]{0,3}\??:[ \t]{0,3}[A-Za-z_][\w.]{0,40}+(?:\[[\w., |\[\]]{0,60}+\])?"
    r"(?:[ \t]{0,3}\|[ \t]{0,3}[A-Za-z_][\w.]{0,40}+){0,3}(?=[ \t]{0,3}=[^=>]))?"
    r"[ \t]{0,3}(?P<op>:=|=>|->|\?\?=|\|\|=|[:=])[ \t]{0,3}" + _VALUE
)
# Calls that pass a password: user.set_password("..."), builder.password("..."),
# ConvertTo-SecureString "..." -AsPlainText, SQL "IDENTIFIED BY '...'" / "PASSWORD '...'".
_CALL_VALUE = re.compile(
    r"(?:(?<![A-Za-z0-9_])(?:set_?|with_?)?(?i:password|passwd|secret|api_?key|token)"
    r"[ \t]{0,2}\([ \t]{0,2}|(?i:ConvertTo-SecureString)[ \t]{1,3}(?:-String[ \t]{1,3})?"
    r"|(?<![A-Za-z0-9_])(?i:identified[ \t]{1,3}by|with[ \t]{1,3}password|password)[ \t]{1,3}"
    r"(?=['\"]))"
    r"(?:\"(?P<dq>[^\"\n]{1,200}+)\"|'(?P<sq>[^'\n]{1,200}+)')"
)

_PASSWORD_KEYS = ("password", "passwd", "pwd", "passphrase", "passcode", "secret")
_API_KEY_KEYS = (
    *("apikey", "accesskey", "secretkey", "privatekey", "token", "clientsecret", "apisecret"),
    *("appsecret", "appkey", "authkey", "masterkey", "accountkey", "signingkey", "sharedkey"),
    *("encryptionkey", "licensekey", "sessionkey", "sessionid", "credential", "credentials"),
    *("signature", "webhooksecret", "consumersecret", "consumerkey", "secretaccesskey"),
)
_NOT_SECRET_KEYS = ("nexttoken", "pagetoken", "continuationtoken", "csrftoken", "tokentype")
_ENV_KEY = re.compile(r"[A-Z][A-Z0-9_]*+")


def key_kind(key: str) -> str | None:
    """The finding kind a value named ``key`` would have (``db_password`` -> a password,
    ``STRIPE_API_KEY`` -> an API key), or None when the name is not a secret's."""
    plain = key.strip("\"'`$@:.-_")
    joined = re.sub(r"[_\-.]", "", plain.lower())
    if not joined or joined.endswith(_NOT_SECRET_KEYS):
        return None
    if joined.endswith(_API_KEY_KEYS):
        return API_KEY
    if joined.endswith(_PASSWORD_KEYS):
        return PASSWORD
    lowered = plain.lower()
    if lowered in {"pass", "pw"} or lowered.endswith(("_pass", "-pass", ".pass", "_pw", "-pw")):
        return PASSWORD
    if plain.endswith(("Pass", "Pw")) and not plain.endswith("ByPass"):
        return PASSWORD
    return None


def _captured(match: re.Match[str]) -> tuple[str, int, int, bool]:
    """The value group of a match: (value, start, end, quoted)."""
    for name in (*_QUOTED, "bare"):
        if name in match.re.groupindex and match[name] is not None:
            return match[name], match.start(name), match.end(name), name != "bare"
    raise AssertionError("pattern always captures a value")


def _trimmed(value: str, start: int, end: int) -> tuple[str, int, int]:
    """A bare value without the trailing punctuation of the sentence around it."""
    word = value.rstrip(".,)]}:?")
    if not word or word.count("(") > word.count(")") or word.count("[") > word.count("]"):
        word = value.rstrip(".,:?")
    return word, start, start + len(word)


def _assignments(text: str, matches: Iterable[re.Match[str]]) -> Iterator[Span]:
    for match in matches:
        kind = key_kind(match["key"])
        if kind is None or text.endswith("[REDACTED:", 0, match.start("key")):
            continue  # not a secret's name, or the kind inside a scrubbed marker
        value, start, end, quoted = _captured(match)
        if not quoted:
            value, start, end = _trimmed(value, start, end)
            if not value:
                continue
            after = text[end : end + 3].lstrip(" \t")
            if after[:1] in ("(", "[", "+", "*", "/", "%", "?") or after.startswith(("||", "&&")):
                continue  # an expression: password = pw + salt, secret = a or b
        rest = text[end : end + 300]
        if kind == API_KEY:
            secret = token_value_is_secret(value, rest) or (
                quoted
                and password_value_is_secret(value, quoted=True, env_key=False)
                and looks_random(value)
            )
        else:
            env_key = _ENV_KEY.fullmatch(match["key"].strip("\"'`$")) is not None
            word = value.strip("*_~")
            prose = match["op"] == ":" and not quoted and word.isalpha()
            if prose and (_followed_by_word(text, end) or word != value):
                continue  # "Password: must be 12 characters", "secret: **dry brining**"
            secret = password_value_is_secret(value, quoted=quoted, env_key=env_key, rest=rest)
        if secret:
            yield Span(kind, start, end)


def _calls(matches: Iterable[re.Match[str]]) -> Iterator[Span]:
    for match in matches:
        value, start, end, _ = _captured(match)
        if password_value_is_secret(value, quoted=True, env_key=False):
            yield Span(PASSWORD, start, end)


def _followed_by_word(text: str, end: int) -> bool:
    rest = text[end : end + 40]
    return re.match(r"[ \t]{1,3}[A-Za-z]", rest) is not None and not rest.lstrip().startswith(
        ("#", "//")
    )


# --- prose: "the wifi password is ...", "my API key is ...", multilingual password words
_PASSWORD_WORDS = (
    r"(?:wi-?fi[ \t]{1,2})?(?:password|passwd|passphrase|passcode|pass[ \t]?code|pin(?:[ \t]code"
    r"|[ \t]number)?|pwd|wi-?fi[ \t]{1,2}(?:key|code)|(?:door|gate|alarm|garage|safe|lock|entry"
    r"|building|keypad|security)[ \t]{1,2}code|contrase[nñ]a|clave|mot[ \t]de[ \t]passe|mdp"
    r"|passwort|kennwort|senha|parola[ \t]d'ordine|wachtwoord|l[oö]senord|has[lł]o)"
)
_KEY_WORDS = (
    r"(?:api[ \t_\-]?key|access[ \t_\-]?key|secret[ \t_\-]?key|private[ \t_\-]?key"
    r"|(?:auth|access|api|bearer|refresh|session|bot|personal[ \t]access)[ \t_\-]?token|token"
    r"|client[ \t_\-]?secret|signing[ \t_\-]?key|webhook[ \t_\-]?secret|secret)"
)
_COPULA = (
    r"(?:(?:is[ \t]now[ \t]set[ \t]to|is[ \t]set[ \t]to|is[ \t]still|is[ \t]now|is|was|are"
    r"|has[ \t]been[ \t](?:set|changed)[ \t]to|changed[ \t]to|became|will[ \t]be|should[ \t]be"
    r"|remains|'s|est|es|ist|lautet|era|était|war|är|jest|é|è)(?![A-Za-z])"
    r"|(?P<op>=|:|->))"
)
_PROSE_KEY = re.compile(
    rf"(?<![A-Za-z0-9_])(?i:(?P<pw>{_PASSWORD_WORDS})|(?P<key>{_KEY_WORDS}))"
    # "for the router", "to the safe", "of my bank account": up to six words
    r"(?:[ \t]{1,3}(?i:for|to|of|on|at|in|des|de|du|del|für|fur|da|do|di|van)"
    r"(?:[ \t]{1,3}[^\s:=]{1,30}+){1,6}?)?"
    rf"[ \t]{{0,3}}(?i:{_COPULA})[ \t]{{0,3}}:?[ \t]{{0,3}}" + _PROSE_VALUE
)
_SET_TO = re.compile(
    r"(?<![A-Za-z0-9_])(?i:set|change|changed|reset|update|updated|use|used|try|tried|enter"
    r"|entered|type|typed)(?:[ \t]{1,3}[^\s:=]{1,30}+){0,4}?[ \t]{1,3}"
    rf"(?i:{_PASSWORD_WORDS})[ \t]{{1,3}}(?i:to|as|with|=|:)[ \t]{{1,3}}" + _PROSE_VALUE
)
_PROSE_ANCHORS = (
    *("pass", "pin", "pwd", "code", "key", "token", "secret", "contrase", "clave", "mdp"),
    *("mot de passe", "passwort", "kennwort", "senha", "parola", "wachtwoord", "senord", "has"),
)


def _prose(text: str, matches: Iterable[re.Match[str]]) -> Iterator[Span]:
    for match in matches:
        value, start, end, quoted = _captured(match)
        if not quoted:
            value, start, end = _trimmed(value, start, end)
            if not value:
                continue
        rest = text[end : end + 300]
        is_key = "key" in match.re.groupindex and match["key"] is not None
        if is_key:
            if token_value_is_secret(value, rest):
                yield Span(API_KEY, start, end)
            continue
        word = match["pw"].lower() if "pw" in match.re.groupindex else ""
        if (word.startswith("pin") or word.endswith("code")) and sum(
            c.isdigit() for c in value
        ) < 4:
            continue  # "the pin was bent", "the door code is on the fridge"
        if "op" in match.re.groupindex and match["op"] is not None:
            # "Password: ..." and "password = ..." read as an assignment, not as a sentence;
            # "password: SomeType = ..." is an annotation, its value is the assignment's
            if match["op"] == ":" and re.match(r"[ \t]*=(?!=)", rest):
                continue
            secret = password_value_is_secret(value, quoted=quoted, env_key=False, rest=rest)
            if secret and not quoted and value.isalpha() and _followed_by_word(text, end):
                secret = False
        else:
            secret = prose_password_is_secret(
                value, quoted=quoted, followed_by_word=_followed_by_word(text, end), rest=rest
            )
        if secret:
            yield Span(PASSWORD, start, end)


# --- weaker contexts, held to stronger values: "password tRuMpEt-42-oboe" (no verb),
# "Pl4net!Express is my password" (value first), "storage key <40+ random characters>"
_PASSWORD_BARE = re.compile(
    r"(?i:password|passwd|passphrase|pwd)[ \t]{1,3}(?P<bare>[^\s\"'`]{6,100}+)"
)
_VALUE_FIRST = re.compile(
    r"(?<![^\s\"'(])(?P<bare>[^\s\"']{4,60}+)[ \t]{1,3}(?:is|was)[ \t]{1,3}(?:my|our|his|her|their)"
    r"(?:[ \t]{1,3}[a-z\-]{1,20}+){0,3}?[ \t]{1,3}(?:password|passcode|passphrase|pin)\b",
    re.IGNORECASE,
)
# A whole word on its own: not a piece of a path, a file name or a longer identifier.
_LONG_TOKEN = re.compile(
    r"(?<![^\s\"'`=:(,\[{])[A-Za-z0-9+/_\-]{32,}+={0,2}(?=[\s\"'`),;\]}]|[.!?]?$|[.!?]\s)"
)
_NAMED_TOKEN_WORDS = ("key", "secret", "token", "password", "credential")
_NEXT_WORDS = re.compile(r"\S*+(?:[ \t]++\S++){0,3}")


def _in_marker(lowered: str, at: int) -> bool:
    """Whether ``at`` is inside a ``[REDACTED:kind]`` marker left by scrubbing."""
    opened = lowered.rfind("[redacted:", max(0, at - 40), at)
    return opened >= 0 and "]" not in lowered[opened:at]


def _strong(value: str) -> bool:
    """Letters and digits, and a symbol or both cases: a generated or chosen password."""
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    symbol = any(not c.isalnum() for c in value)
    return letters and digits and (symbol or mixed)


def _weak_contexts(text: str, lowered: str) -> Iterator[Span]:
    starts = _at_words(lowered, ("password", "passwd", "passphrase", "pwd"))
    for match in _matched(_PASSWORD_BARE, text, starts, 120):
        value, start, end = _trimmed(match["bare"], *match.span("bare"))
        rest = text[end : end + 300]
        if _strong(value) and not is_code_reference(value, rest) and not is_pointer(value):
            yield Span(PASSWORD, start, end)
    for at in _occurrences(lowered, ("password", "passcode", "passphrase", "pin"), word_start=True):
        for match in _searched(_VALUE_FIRST, text, [(max(0, at - 110), at)]):
            value, start, end = match["bare"], *match.span("bare")
            if prose_password_is_secret(value, quoted=False, followed_by_word=False):
                yield Span(PASSWORD, start, end)
    for at in _occurrences(lowered, _NAMED_TOKEN_WORDS, word_start=False):
        if "public" in lowered[max(0, at - 12) : at] or _in_marker(lowered, at):
            continue
        # the key word's own word and the three after it, on its line: counted in words,
        # not characters, so scrubbing a value before the token does not pull it closer
        words = _NEXT_WORDS.match(text, at)
        stop = words.end() if words else at
        for match in _LONG_TOKEN.finditer(text, at, stop):
            token = match[0]
            if token.startswith(("AAAA", "pk_", "sha1-", "sha256-", "sha384-", "sha512-")):
                continue
            if (
                _strong(token)
                and any(c.isupper() for c in token)
                and any(c.islower() for c in token)
            ):
                yield Span(API_KEY, *match.span())


# --- URLs, headers, command lines
_URL_CREDENTIAL = re.compile(
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{1,20}://"
    r"[^\s:/@]{0,100}:(?P<value>[^\s@/]{1,200})@"
)
_BEARER = re.compile(
    r"(?<![A-Za-z0-9])(?i:bearer|authorization:[ \t]{0,3}(?:basic|token|bearer|ssws)|ssws)"
    r"[ \t]{1,3}(?P<value>[A-Za-z0-9_\-.~+/]{16,}+=*)"
)
_VALUE_ARG = r"(?P<value>'[^'\n]{1,200}'|\"[^\"\n]{1,200}\"|[^\s'\"|;&]{1,200}+)"
_COMMANDS = (
    re.compile(
        r"(?<![A-Za-z0-9_\-])(?:mysql|mysqldump|mysqladmin|mariadb|mysqlimport|mysqlsh"
        r"|mysqlcheck)(?![A-Za-z0-9_\-])[^\n|;&]{0,160}?[ \t]-p(?P<value>'[^'\n]{1,200}'"
        r"|\"[^\"\n]{1,200}\"|[^\s'\"|;&]{1,200}+)"
    ),
    re.compile(r"(?<![A-Za-z0-9_\-])sshpass[ \t]{1,3}-p[ \t]{0,3}" + _VALUE_ARG),
    re.compile(
        r"(?<![A-Za-z0-9_\-])(?:redis-cli|docker[ \t]{1,3}login|podman[ \t]{1,3}login|mongosh?"
        r"|sqlcmd|helm[ \t]{1,3}registry[ \t]{1,3}login)(?![A-Za-z0-9_\-])[^\n|;&]{0,160}?"
        r"[ \t](?:-a|-p|-P)[ \t]{1,3}" + _VALUE_ARG
    ),
    re.compile(
        r"(?<![A-Za-z0-9_\-])--(?:password|passwd|pass|pwd|db-password|token|api-key|apikey"
        r"|secret|client-secret|auth-token|access-token|secret-key|access-key)(?:=|[ \t]{1,3})"
        + _VALUE_ARG
    ),
    re.compile(
        r"(?<![A-Za-z0-9_\-])curl(?![A-Za-z0-9_\-])[^\n|;&]{0,200}?[ \t](?:-u|--user)[ \t=]{0,3}"
        r"['\"]?[^\s:'\"]{0,100}:(?P<value>[^\s'\"]{1,200})"
    ),
    re.compile(
        r"(?<![A-Za-z0-9_\-])htpasswd[ \t]{1,3}-[A-Za-z]{0,4}b[A-Za-z]{0,4}[ \t]{1,3}\S{1,200}+"
        r"[ \t]{1,3}\S{1,100}+[ \t]{1,3}" + _VALUE_ARG
    ),
    re.compile(
        r"(?<![A-Za-z0-9_\-])machine[ \t]{1,3}\S{1,200}+[ \t\n]{1,3}login[ \t]{1,3}\S{1,100}+"
        r"[ \t\n]{1,3}password[ \t]{1,3}" + _VALUE_ARG
    ),
    re.compile(
        r"(?<![A-Za-z0-9_\-])echo[ \t]{1,3}(?P<value>'[^'\n]{1,100}'|\"[^\"\n]{1,100}\""
        r"|[^\s'\"|;&]{1,100}+)[ \t]{0,3}\|[ \t]{0,3}sudo[ \t]{1,3}-S"
    ),
)
_COMMAND_ANCHORS = (
    "mysql",
    "mariadb",
    "sshpass",
    "-a",
    "-p",
    "--",
    "curl",
    "htpasswd",
    "login",
    "sudo",
)


def _unquote(value: str, start: int, end: int) -> tuple[str, int, int, bool]:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1], start + 1, end - 1, True
    return value, start, end, False


def _commands(matches: Iterable[re.Match[str]]) -> Iterator[Span]:
    for match in matches:
        value, start, end, quoted = _unquote(match["value"], *match.span("value"))
        if value and password_value_is_secret(value, quoted=quoted, env_key=True):
            yield Span(PASSWORD, start, end)


def _urls(matches: Iterable[re.Match[str]]) -> Iterator[Span]:
    for match in matches:
        if password_value_is_secret(match["value"], quoted=True, env_key=True):
            yield Span(PASSWORD, *match.span("value"))


def _bearers(matches: Iterable[re.Match[str]]) -> Iterator[Span]:
    for match in matches:
        value = match["value"]
        shaped = looks_random(value) or (len(value) >= 20 and not is_placeholder(value))
        if shaped and not is_code_reference(value) and not is_pointer(value):
            yield Span("bearer_token", *match.span("value"))


# --- an AWS secret access key a sentence introduces (40 characters of base64)
_FORTY = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_CONTEXT = re.compile(r"aws|amazon|secret|access[ _\-]?key", re.IGNORECASE)


def _aws_secrets(text: str, matches: Iterable[re.Match[str]]) -> Iterator[Span]:
    for match in matches:
        token = match[0]
        shaped = any(c.isupper() for c in token) and any(c.islower() for c in token)
        if not (shaped and (any(c.isdigit() for c in token) or "/" in token or "+" in token)):
            continue
        before = text[max(0, match.start() - 100) : match.start()]
        if _AWS_CONTEXT.search(before):
            yield Span("aws_secret_key", *match.span())


# --- government ids named by the sentence ("SSN 123456789", "passport number X1234567")
_ID_CONTEXT = re.compile(
    r"(?<![A-Za-z0-9])(?i:(?P<ssn>ssn|social[ \t]security(?:[ \t]number)?)|(?P<sin>social"
    r"[ \t]insurance[ \t]number|sin)|(?P<other>passport|driver'?s?[ \t]licen[cs]e|tax[ \t]id|tin"
    r"|ein|aadhaar|bsn|personnummer|national[ \t]id|id[ \t]card))"
    r"(?:[ \t](?i:number|no\.?|num|#))?[ \t]{0,3}(?i:is|was|:|#|=)?[ \t]{0,3}"
    r"(?P<value>[A-Z0-9](?:[A-Z0-9]|[ .\-](?=[A-Z0-9])){4,17}+)(?![A-Za-z0-9])"
)
_ID_ANCHORS = (
    "ssn",
    "social",
    "sin",
    "passport",
    "licen",
    "tax",
    "tin",
    "ein",
    "aadhaar",
    "bsn",
    "personnummer",
    "national",
    "id card",
)


def _ids(matches: Iterable[re.Match[str]]) -> Iterator[Span]:
    for match in matches:
        value = match["value"]
        digits = re.sub(r"[ .\-]", "", value)
        if sum(c.isdigit() for c in digits) < 5:
            continue
        if match["ssn"] or match["sin"]:
            if len(digits) == 9 and digits.isdigit() and not digits.startswith(("000", "666")):
                yield Span("us_ssn" if match["ssn"] else "ca_sin", *match.span("value"))
        else:
            yield Span("government_id", *match.span("value"))


# --- XML and config files: <password>...</password>, <add key="Password" value="..."/>
_XML = re.compile(
    r"<(?P<tag>[A-Za-z_][\w:.\-]{0,40}+)>(?P<sq>[^<\n]{1,200}+)</(?P=tag)>"
    r"|<add[ \t]{1,3}key=\"(?P<tag2>[^\"\n]{1,60}+)\"[ \t]{1,3}value=\"(?P<dq>[^\"\n]{1,200}+)\""
)


def _xml(text: str, matches: Iterable[re.Match[str]]) -> Iterator[Span]:
    for match in matches:
        kind = key_kind(match["tag"] or match["tag2"])
        value, start, end, _ = _captured(match)
        if kind == API_KEY and token_value_is_secret(value, text[end : end + 300]):
            yield Span(API_KEY, start, end)
        elif kind == PASSWORD and password_value_is_secret(value, quoted=True, env_key=False):
            yield Span(PASSWORD, start, end)


# --- where each rule runs: words that must start (or end) what the rule matches
_KEY_CHARS = frozenset(string.ascii_letters + string.digits + "_-.")
_WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_")
# Suffixes a secret-naming key ends with; looked up as substrings (``dbPassword``).
_ASSIGNMENT_TRIGGERS = (
    "pass",
    "pw",
    "secret",
    "key",
    "token",
    "credential",
    "signature",
    "session",
)
_CALL_TRIGGERS = ("password", "passwd", "secret", "apikey", "api_key", "token")
# Whole words (lower-cased) that start what a rule matches; looked up in the word set first.
_CALL_WORDS = frozenset({"identified", "convertto"})
_PROSE_WORDS = frozenset(
    {
        *("password", "passwd", "passphrase", "passcode", "pass", "pin", "pwd", "wifi", "wi"),
        *("door", "gate", "alarm", "garage", "safe", "lock", "entry", "building", "keypad"),
        *("security", "contraseña", "contrasena", "clave", "mot", "mdp", "passwort", "kennwort"),
        *("senha", "parola", "wachtwoord", "lösenord", "losenord", "hasło", "haslo", "api"),
        *("apikey", "access", "secret", "private", "auth", "bearer", "refresh", "session"),
        *("bot", "personal", "token", "client", "signing", "webhook"),
    }
)
_SET_TO_WORDS = frozenset(
    {
        *("set", "change", "changed", "reset", "update", "updated", "use", "used", "try"),
        *("tried", "enter", "entered", "type", "typed"),
    }
)
_PASSWORD_WORDS_SET = frozenset(
    {
        *("password", "passwd", "passphrase", "passcode", "pass", "pin", "pwd", "code", "key"),
        *("contraseña", "contrasena", "clave", "mdp", "passwort", "kennwort", "senha"),
        *("parola", "wachtwoord", "lösenord", "losenord", "hasło", "haslo"),
    }
)
_BEARER_WORDS = frozenset({"bearer", "authorization", "ssws"})
_ID_WORDS = frozenset(
    {
        *("ssn", "social", "sin", "passport", "driver", "drivers", "tax", "tin", "ein"),
        *("aadhaar", "bsn", "personnummer", "national", "id"),
    }
)
_AWS_TRIGGERS = ("aws", "amazon", "secret", "access")
_COMMAND_WORDS: tuple[frozenset[str], ...] = (
    frozenset({"mysql", "mariadb", "mysqldump", "mysqladmin", "mysqlimport", "mysqlsh"}),
    frozenset({"sshpass"}),
    frozenset({"redis", "docker", "podman", "mongo", "mongosh", "sqlcmd", "helm"}),
    frozenset(),  # --password=...: found by "--"
    frozenset({"curl"}),
    frozenset({"htpasswd"}),
    frozenset({"machine"}),
    frozenset({"echo"}),
)
_TOKEN = re.compile(r"[^\W_]++")


def _occurrences(lowered: str, triggers: Iterable[str], *, word_start: bool) -> Iterator[int]:
    """Positions of each trigger in ``lowered``; with ``word_start``, only at a word start."""
    for trigger in triggers:
        at = lowered.find(trigger)
        while at >= 0:
            starts_word = at == 0 or not (lowered[at - 1].isalnum() or lowered[at - 1] == "_")
            if (not word_start or starts_word) and not _in_marker(lowered, at):
                yield at
            at = lowered.find(trigger, at + 1)


def _back_to(text: str, at: int, chars: frozenset[str], limit: int = 60) -> int:
    """The start of the run of ``chars`` that ends at ``at`` (at most ``limit`` back)."""
    floor = max(0, at - limit)
    while at > floor and text[at - 1] in chars:
        at -= 1
    return at


def _matched(
    pattern: re.Pattern[str], text: str, starts: Iterable[int], reach: int
) -> Iterator[re.Match[str]]:
    """``pattern`` matched at each start (once per position), reading ``reach`` chars on."""
    size = len(text)
    for start in sorted(set(starts)):
        match = pattern.match(text, start, min(size, start + reach))
        if match is not None:
            yield match


def _searched(
    pattern: re.Pattern[str], text: str, windows: Iterable[tuple[int, int]]
) -> Iterator[re.Match[str]]:
    """Matches of ``pattern`` inside each window, the windows merged first."""
    merged: list[list[int]] = []
    for start, end in sorted(windows):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in merged:
        # read on past the window so a match is never cut short by it
        for match in pattern.finditer(text, start, min(len(text), end + 256)):
            if match.start() >= end:
                break
            yield match


def _at_words(lowered: str, words: Iterable[str]) -> list[int]:
    return list(_occurrences(lowered, words, word_start=True))


def context_spans(text: str, lowered: str) -> list[Span]:
    """Every context-rule span in ``text``; ``lowered`` is ``text`` lower-cased position for
    position. Each rule is tried only where its trigger words are."""
    size = len(text)
    found: list[Span] = []
    words = set(_TOKEN.findall(lowered))
    aws = list(_occurrences(lowered, _AWS_TRIGGERS, word_start=False))
    if aws:
        hits = _searched(_FORTY, text, ((at, min(size, at + 140)) for at in aws))
        found += _aws_secrets(text, hits)
    key_ends = list(_occurrences(lowered, _ASSIGNMENT_TRIGGERS, word_start=False))
    if key_ends:
        keys = [_back_to(text, at, _KEY_CHARS) for at in key_ends]
        found += _assignments(text, _matched(_ASSIGNMENT, text, keys, 420))
        calls = [
            _back_to(text, at, _WORD_CHARS)
            for at in _occurrences(lowered, _CALL_TRIGGERS, word_start=False)
        ]
        found += _calls(_matched(_CALL_VALUE, text, calls, 300))
        if "</" in lowered or "<add" in lowered:
            found += _xml(text, _XML.finditer(text))
    if present := words & _CALL_WORDS:
        found += _calls(_matched(_CALL_VALUE, text, _at_words(lowered, present), 300))
    if present := words & _BEARER_WORDS:
        found += _bearers(_matched(_BEARER, text, _at_words(lowered, present), 400))
    if present := words & _PROSE_WORDS:
        matches = list(_matched(_PROSE_KEY, text, _at_words(lowered, present), 420))
        if (verbs := words & _SET_TO_WORDS) and words & _PASSWORD_WORDS_SET:
            matches += _matched(_SET_TO, text, _at_words(lowered, verbs), 420)
        found += _prose(text, matches)
    if "://" in lowered:
        urls = (
            (max(0, at - 22), min(size, at + 320))
            for at in _occurrences(lowered, ("://",), word_start=False)
        )
        found += _urls(_searched(_URL_CREDENTIAL, text, urls))
    for pattern, command_words in zip(_COMMANDS, _COMMAND_WORDS, strict=True):
        if not command_words:
            starts = list(_occurrences(lowered, ("--",), word_start=False))
        elif present := words & command_words:
            starts = _at_words(lowered, present)
        else:
            continue
        found += _commands(_matched(pattern, text, starts, 400))
    found += _weak_contexts(text, lowered)
    if present := words & _ID_WORDS:
        found += _ids(_matched(_ID_CONTEXT, text, _at_words(lowered, present), 80))
    return found
