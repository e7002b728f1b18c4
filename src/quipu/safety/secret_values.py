"""Is this value a credential? Decided from the value, not from the word that names it.

A context rule (``password = ...``, ``my api key is ...``) finds a candidate value; these
functions decide whether it is a literal credential or something that only looks like one
in code and prose: an expression, a call, a type, a variable, an env lookup, a template
placeholder, a test fixture made of placeholder words ("testpassword", "changeme"), or a
message string ("Password is required").
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import pairwise

__all__ = [
    "is_code_reference",
    "is_placeholder",
    "is_pointer",
    "looks_random",
    "password_value_is_secret",
    "prose_password_is_secret",
    "token_value_is_secret",
]


def _words(text: str) -> list[str]:
    return text.split()


# Words that make up placeholder, default and fixture values: "testpassword",
# "your_api_key_here", "mysecretpassword", "changeme", the database image defaults,
# "you-will-never-guess".
_PLACEHOLDER_WORDS = frozenset(
    _words(
        """
    test tests testing tester password passwords passwd pass pwd pw secret secrets key keys
    token tokens api apikey example examples sample dummy fake mock mocked foo bar baz qux
    quux changeme change me admin administrator root user users username guest demo default
    defaults my your our the a an here there this that xxx placeholder value insert enter put
    replace with real actual some super very dev develop development local localhost staging
    db database postgres postgresql mysql mongo mongodb redis rabbit rabbitmq app application
    service client server new old temp tmp hello world abc xyz not set none null nil empty
    string str required optional todo fixme tbd redacted hidden masked private public id name
    mail email login auth access refresh bearer jwt session cookie csrf hash hashed salt
    salted encrypted random generated strong correct wrong invalid valid bad good other
    another second first one two confirm confirmation current repeat verify verification
    temporary temp
    word django flask rails laravel spring insecure unsafe do use in production prod only for
    to be keep it safe never guess will you can cant own goes must should is of and or
    signing sign signature webhook hook shared master system sys pat personal app
    """
    )
)
_EXACT_PLACEHOLDERS = frozenset(
    _words(
        """
    none null nil undefined true false required optional empty unset redacted hidden masked
    changeme change_me changeit password passwd secret string str int bytes example
    placeholder your_password your_api_key todo tbd xxx xxxx xxxxx
    """
    )
)
_POINTER_PREFIXES = (
    *("$", "%", "{{", "{%", "{", "<", "#{", "@{", "[redacted", "[hidden", "[masked"),
    *("env:", "env.", "vault:", "op://", "arn:", "ssm:", "secret/", "secrets/", "kv/"),
    *("/", "~/", "./", "../", "file:", "sm://", "gcp:", "azure:", "keyring:", "process.env"),
)
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*+(?:_[A-Z0-9]++)++|[A-Z]{3,}")
# A call, index or generic: ``db.Column(``, ``fields.Str(``, ``os.environ[``, ``Option<String>``.
_CALL = re.compile(r"[A-Za-z_$@][\w$]*+(?:(?:\.|::|->|\?\.)[A-Za-z_$][\w$]*+)*+\s*+[(\[<{]")
# An attribute chain whose head has no digits: ``settings.db_password``, ``Config.SECRET``
# (``Summer2024.Fall`` is a password, not an attribute).
_ATTRIBUTE = re.compile(r"[A-Za-z_$][A-Za-z_$]*+(?:(?:\.|::|->|\?\.)[A-Za-z_$][\w$]*+)++[)\];,]*")
_SNAKE = re.compile(r"_?[a-z][a-z0-9]*+(?:_[a-z0-9]++)++_?")
_CAMEL = re.compile(r"[a-z]++(?:[A-Z][a-z]++)++[0-9]{0,2}")
_PASCAL = re.compile(r"(?:[A-Z][a-z]++)++[?!]?")
_WORD = re.compile(r"[A-Za-z]++")
_WORDS_WITH_HYPHENS = re.compile(r"[a-z]++(?:-[a-z]++)++")
_SEGMENTS = re.compile(r"[^\-_.:/+= ,;@|~()\[\]{}<>'\"]++")
_MESSAGE_WORDS = frozenset(
    _words(
        """
    the a an to of is be must at least your you please enter invalid characters should not
    and or for with must cannot can't does match required incorrect wrong too short long
    characters letters digits contain contains enter type provide missing forgot reset
    """
    )
)
# Words that, after "the password is", describe the password instead of being it.
_PROSE_WORDS = frozenset(
    _words(
        """
    a an the this that my your our their his her its same different new old correct
    incorrect wrong right weak strong long short secure insecure safe unsafe set unset empty
    blank missing required optional invalid valid expired fine ok okay good bad here there
    below above attached saved stored written known unknown simple easy hard complex
    complicated random temporary permanent mandatory case sensitive not no too very still
    now also always never just only in on at for from with without to of by as via under
    inside within being what which who whatever either both each every any some all none
    changing changed reset updated rotated shared managed handled kept hidden visible one
    two three four five six seven eight nine ten twelve sixteen characters chars letters
    digits numbers long
    """
    )
)
_PROSE_SUFFIXES = ("ed", "ing", "ly", "ful", "ous", "ive", "able", "ible", "less", "ent", "ant")


@lru_cache(maxsize=4096)
def _segments_into_words(letters: str) -> bool:
    """True when ``letters`` splits into placeholder words, one of them 4+ letters long."""
    n = len(letters)
    if n == 0 or n > 60:
        return False
    # best[i]: longest word used in a split of letters[:i] (-1 when none exists)
    best = [-1] * (n + 1)
    best[0] = 0
    for i in range(1, n + 1):
        for j in range(max(0, i - 14), i):
            if best[j] >= 0 and letters[j:i] in _PLACEHOLDER_WORDS:
                best[i] = max(best[i], best[j], i - j)
    return best[n] >= 4 or (best[n] >= 0 and letters in _PLACEHOLDER_WORDS)


def is_placeholder(value: str) -> bool:
    """Fixture and default values made of placeholder words, digits and separators.

    ``testpassword``, ``password123``, ``your-api-key-here``, ``mysecretpassword``,
    ``******``. Not ``hunter2`` or ``Xk9#mQ2vL!p``.
    """
    lowered = value.lower().strip()
    if lowered in _EXACT_PLACEHOLDERS or len(set(lowered)) <= 1:
        return True
    if re.fullmatch(r"[x*.#\-_ ]{3,}", lowered) or re.fullmatch(r"(?:x{2,}[\-_ ]?)+", lowered):
        return True
    letters = "".join(re.findall(r"[a-z]+", lowered))
    return _segments_into_words(letters)


_FILE = re.compile(
    r"(?:[A-Za-z]:\\|[\w.\-]*[/\\])?[\w.\-\\/]*\.(?:json|pem|key|p12|pfx|txt|ya?ml|env|ini|cfg"
    r"|conf|toml|crt|cer|der|jks|keystore|gpg|asc|age|enc)",
    re.IGNORECASE,
)


def is_pointer(value: str) -> bool:
    """Template variables, env var names, file and vault paths and redaction markers."""
    lowered = value.lower()
    return (
        _FILE.fullmatch(value) is not None
        or "[redacted:" in lowered  # already scrubbed
        or lowered.startswith(_POINTER_PREFIXES)
        or _ENV_NAME.fullmatch(value) is not None
        or lowered.endswith(("_here", "-here", ">", "}}", "}"))
    )


# Go slices and references, Rust borrows, SQL bind parameters and Ruby symbols, YAML tags,
# parenthesised expressions: []byte(...), &str, &Config{...}, :password, !vault, (a or b)
_CODE_SIGIL = re.compile(r"\[\]|&(?:mut[ \t])?[A-Za-z_]|:[a-z_][a-z0-9_]*$|![A-Za-z]+$|\(")
_CLOSERS = {"(": ")", "[": "]", "<": ">", "{": "}"}


def is_code_reference(value: str, rest: str = "") -> bool:
    """Calls, attribute chains, variables and types: ``db.Column(...)``, ``new_password``.

    A call must close its bracket within the value or the ``rest`` of the text after it
    (``Pa55(word`` is a password, ``db.Column(db.String(120), nullable=False)`` a call).
    """
    if _CODE_SIGIL.match(value):
        return True
    call = _CALL.match(value)
    if call is not None:
        closer = _CLOSERS[value[call.end() - 1]]
        if closer in value[call.end() :] or closer in rest[:300]:
            return True
    return (
        _ATTRIBUTE.fullmatch(value) is not None
        or _SNAKE.fullmatch(value) is not None
        or _CAMEL.fullmatch(value) is not None
    )


def _message(value: str) -> bool:
    """A UI or error message: several words, some of them ordinary function words."""
    words = value.lower().split()
    if len(words) < 2:
        return False
    letters = [re.sub(r"[^a-z']", "", w) for w in words]
    if any(w in _MESSAGE_WORDS for w in letters) and len(words) >= 3:
        return True
    return any(w in {"password", "passwords", "secret", "token", "key"} for w in letters)


def _segment_random(segment: str) -> bool:
    """A run that mixes letters and digits, or cases, the way generated keys do."""
    if len(segment) < 8:
        return False
    letters = sum(c.isalpha() for c in segment)
    digits = sum(c.isdigit() for c in segment)
    if letters and digits:
        flips = sum(a.isdigit() != b.isdigit() for a, b in pairwise(segment))
        return flips >= 2 or (digits >= 3 and letters >= 3)
    upper = sum(c.isupper() for c in segment)
    lower = sum(c.islower() for c in segment)
    if upper >= 2 and lower >= 2 and len(segment) >= 12:
        return _CAMEL.fullmatch(segment) is None and _PASCAL.fullmatch(segment) is None
    return False


def looks_random(value: str) -> bool:
    """Whether ``value`` holds a generated-looking run (keys, tokens, hashes of secrets)."""
    return any(_segment_random(s) for s in _SEGMENTS.findall(value))


def token_value_is_secret(value: str, rest: str = "") -> bool:
    """An API key, token or client secret value: long, generated-looking, not a pointer."""
    if len(value) < 12 or " " in value.strip():
        return False
    if is_pointer(value) or is_code_reference(value, rest) or is_placeholder(value):
        return False
    return looks_random(value)


def password_value_is_secret(value: str, *, quoted: bool, env_key: bool, rest: str = "") -> bool:
    """A password value in code or config.

    ``quoted``: a string literal (``"..."``), always a literal. ``env_key``: the key is an
    env-style name (``DB_PASS=``), so even a bare word is a literal. Otherwise a bare word
    is a variable, a type or an expression unless it carries digits or symbols.
    """
    stripped = value.strip()
    if len(stripped) < 4 or is_pointer(stripped) or is_placeholder(stripped):
        return False
    if quoted:
        return not _message(stripped)
    if is_code_reference(stripped, rest):
        return False
    if env_key:
        return True
    if _WORD.fullmatch(stripped):
        # a bare word: a variable or a type in code; only a long unbroken run is a password
        return len(stripped) >= 16 and stripped.islower()
    return True


def prose_password_is_secret(
    value: str, *, quoted: bool, followed_by_word: bool, rest: str = ""
) -> bool:
    """The value after "the password is" in prose."""
    stripped = value.strip()
    if not quoted and stripped.endswith("!") and stripped[:-1].isalpha():
        stripped = stripped[:-1]
    if len(stripped) < 4 or is_pointer(stripped):
        return False
    lowered = stripped.lower()
    if lowered in _EXACT_PLACEHOLDERS or len(set(lowered)) <= 1:
        return False
    if quoted:
        return not _message(stripped)
    if _WORD.fullmatch(stripped) or _WORDS_WITH_HYPHENS.fullmatch(lowered):
        if len(stripped) >= 16 and "-" not in stripped:
            return True
        if followed_by_word or lowered in _PROSE_WORDS:
            return False
        parts = lowered.split("-")
        return not any(p in _PROSE_WORDS or p.endswith(_PROSE_SUFFIXES) for p in parts)
    return not is_code_reference(stripped, rest)
