"""Who "she" and "he" are: the last person the user called "my X" in the session. Pure.

"My partner's birthday is on the 15th. She hates surprise parties." reads the second
sentence as "my partner hates surprise parties", so it becomes a standalone memory.
"""

from __future__ import annotations

import re

__all__ = ["remember_people", "resolve_pronoun"]


_SHE = frozenset(
    [
        "wife",
        "sister",
        "mother",
        "mom",
        "mum",
        "daughter",
        "girlfriend",
        "grandma",
        "grandmother",
        "aunt",
        "niece",
        "fiancee",
        "fiancée",
        "stepdaughter",
    ]
)
_HE = frozenset(
    [
        "husband",
        "brother",
        "father",
        "dad",
        "son",
        "boyfriend",
        "grandpa",
        "grandfather",
        "uncle",
        "nephew",
        "fiance",
        "fiancé",
        "stepson",
    ]
)
_PERSON = re.compile(
    r"\bmy ((?:best |older |younger |little |big |twin )?(?:"
    + "|".join(sorted(_SHE | _HE, key=len, reverse=True))
    + r"|partner|friend|boss|manager|roommate|flatmate|colleague|coworker|dog|cat|puppy|kitten"
    r"|neighbou?r|doctor|therapist|teacher|coach)(?:'s)?)\b(?-i: ([A-Z][a-z]+))?",
    re.IGNORECASE,
)
_PRONOUN_START = re.compile(r"^(?P<pronoun>she|he)(?P<be>'s| is)?\b", re.IGNORECASE)


def remember_people(body: str, people: dict[str, str]) -> None:
    """Note who "she" and "he" may refer to next: the last person the user called "my X"."""
    for match in _PERSON.finditer(body):
        relation = match.group(1).lower().removesuffix("'s")
        noun = relation.split()[-1]
        phrase = f"my {relation}" + (f" {match.group(2)}" if match.group(2) else "")
        for pronoun in ("she", "he"):
            if (pronoun == "she" and noun in _HE) or (pronoun == "he" and noun in _SHE):
                continue
            people[pronoun] = phrase


def resolve_pronoun(body: str, people: dict[str, str]) -> str:
    """ "She hates surprises" as "my partner hates surprises" when the user just named her."""
    m = _PRONOUN_START.match(body)
    if not m or m["pronoun"].lower() not in people:
        return body
    subject = people[m["pronoun"].lower()]
    return subject + (" is" if m["be"] else "") + body[m.end() :]
