"""Rewrite a first-person statement as a standalone third-person memory. Pure.

"I live in Lisbon and work at Farfetch" becomes "User lives in Lisbon and works at
Farfetch"; "my sister is a chef" becomes "User's sister is a chef"; "we deploy on Fridays"
becomes "User's team deploys on Fridays" (or "User's family ..." in a household context).
The first person mentioned becomes "User", later mentions "they"/"their"; the verb after
a singular subject is put in the third person.
"""

from __future__ import annotations

import re

__all__ = ["ADVERBS", "COMMON_VERBS", "IRREGULAR_PAST", "third_person", "third_singular"]

_TOKEN = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)*(?:-[A-Za-z]+)*|[^A-Za-z]+")

ADVERBS = frozenset(
    [
        "really",
        "also",
        "absolutely",
        "totally",
        "just",
        "genuinely",
        "honestly",
        "actually",
        "still",
        "definitely",
        "truly",
        "kinda",
        "pretty",
        "literally",
        "seriously",
        "personally",
        "usually",
        "always",
        "generally",
        "typically",
        "normally",
        "mostly",
        "often",
        "sometimes",
        "never",
        "rarely",
        "currently",
        "now",
        "only",
        "even",
        "already",
        "finally",
        "recently",
        "probably",
        "mainly",
        "basically",
        "certainly",
        "strongly",
        "much",
        "once",
    ]
)
_MODALS = frozenset(
    [
        "can",
        "could",
        "will",
        "would",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "used",
        "can't",
        "cannot",
        "won't",
        "wouldn't",
        "shouldn't",
        "couldn't",
        "mustn't",
    ]
)
IRREGULAR_PAST = frozenset(
    [
        "was",
        "were",
        "had",
        "did",
        "went",
        "got",
        "made",
        "took",
        "saw",
        "came",
        "knew",
        "thought",
        "told",
        "became",
        "left",
        "felt",
        "brought",
        "began",
        "kept",
        "held",
        "wrote",
        "stood",
        "heard",
        "meant",
        "met",
        "ran",
        "paid",
        "sat",
        "spoke",
        "lay",
        "led",
        "read",
        "grew",
        "lost",
        "fell",
        "sent",
        "built",
        "understood",
        "drew",
        "broke",
        "spent",
        "won",
        "rose",
        "drove",
        "bought",
        "wore",
        "chose",
        "sold",
        "forgot",
        "flew",
        "taught",
        "caught",
        "fought",
        "found",
        "gave",
        "slept",
        "overslept",
        "swept",
        "wept",
        "crept",
        "leapt",
        "dealt",
        "lent",
        "bent",
        "learnt",
        "burnt",
        "dreamt",
        "sought",
        "ate",
        "swam",
        "sang",
        "drank",
        "rode",
        "hid",
        "shook",
        "threw",
        "froze",
        "stole",
        "woke",
    ]
)
_PLURAL = {"am": "are", "was": "were", "wasn't": "weren't", "'m": "are"}
_THIRD = {
    "am": "is",
    "'m": "is",
    "are": "is",
    "were": "was",
    "have": "has",
    "do": "does",
    "go": "goes",
    "don't": "doesn't",
    "haven't": "hasn't",
    "aren't": "isn't",
    "weren't": "wasn't",
}
# Base forms that may follow "and"/"or" with the subject left out ("live in X and work at Y").
COMMON_VERBS = frozenset(
    [
        "bring",
        "live",
        "work",
        "love",
        "like",
        "prefer",
        "hate",
        "use",
        "run",
        "play",
        "speak",
        "drive",
        "own",
        "have",
        "go",
        "study",
        "teach",
        "enjoy",
        "eat",
        "drink",
        "walk",
        "read",
        "write",
        "travel",
        "cook",
        "bake",
        "swim",
        "cycle",
        "climb",
        "ski",
        "surf",
        "paint",
        "sing",
        "code",
        "build",
        "manage",
        "lead",
        "deploy",
        "host",
        "ship",
        "maintain",
        "develop",
        "visit",
        "spend",
        "make",
        "take",
        "keep",
        "want",
        "need",
        "avoid",
        "dislike",
        "adore",
        "miss",
        "plan",
        "intend",
        "sit",
        "fly",
        "stay",
        "attend",
        "support",
        "follow",
        "practice",
        "volunteer",
        "teach",
        "rent",
        "share",
        "commute",
    ]
)


#: Past forms spelt like the present ("I recently set a personal best"): left as written when
#: the text says it is past (issue 24: "User recently sets ...").
_SAME_PAST = frozenset(
    ["set", "put", "cut", "hit", "let", "quit", "hurt", "cost", "shut", "spread", "bet", "upset"]
)
_PAST_CONTEXT = re.compile(
    r"\b(?:recently|just|already|finally|yesterday|ago|last|once|earlier|previously"
    r"|in (?:19|20)\d\d)\b",
    re.IGNORECASE,
)


#: Present forms spelt like a past ("I usually need a pick-me-up" → "needs").
_EED = frozenset(
    ["need", "feed", "seed", "bleed", "breed", "speed", "proceed", "succeed", "exceed", "weed"]
)


def third_singular(verb: str) -> str:
    """The third-person singular present of a base-form verb ("fly" → "flies")."""
    low = verb.lower()
    if low in _THIRD:
        out = _THIRD[low]
    elif low in _MODALS or low in IRREGULAR_PAST or (low.endswith("ed") and low not in _EED):
        return verb
    elif re.search(r"(?:s|sh|ch|x|z|o)$", low):
        out = low + "es"
    elif re.search(r"[^aeiou]y$", low):
        out = low[:-1] + "ies"
    else:
        out = low + "s"
    return out.capitalize() if verb[:1].isupper() else out


def _is_adverb(word: str) -> bool:
    low = word.lower()
    return low in ADVERBS or (low.endswith("ly") and len(low) > 4 and low not in ("fly", "reply"))


_PAIR = re.compile(r"\b(?:my|our)\s+((?:[\w-]+\s+){0,2}?[\w-]+)\s+and\s+I\b", re.IGNORECASE)


#: "I usually meal prep on Sundays": a two-word verb, conjugated as one ("meal-preps").
_COMPOUND_VERB = re.compile(
    r"(?P<lead>\b(?:I|we)(?: (?:usually|always|often|never|sometimes|also|still|mostly|just))*"
    r" )(?P<first>meal|batch|bulk|food|grocery|spring|deep) (?P<second>prep|cook|shop|clean|buy)\b",
    re.IGNORECASE,
)


def third_person(text: str, *, we_as: str = "User's team", assistant: bool = False) -> str:
    """``text`` with its first-person references rewritten (see the module docstring).

    With ``assistant`` the second person names the assistant ("your answers" → "its
    answers"), for instructions the user gives it.
    """
    used = False
    text = _COMPOUND_VERB.sub(r"\g<lead>\g<first>-\g<second>", text)
    past = bool(_PAST_CONTEXT.search(text))
    pair = _PAIR.search(text)
    if pair:
        text = f"{text[: pair.start()]}User and their {pair.group(1)}{text[pair.end() :]}"
        used = True
    out: list[str] = []
    pending = False  # a singular subject was just written; the next verb agrees with it
    plural = False  # "they" was just written; "was" becomes "were"
    singular_active = False
    after_conjunction = False
    for token in _TOKEN.findall(text):
        if not token[0].isalpha():
            out.append(token)
            if re.search(r"[,;:.!?]", token):
                singular_active = False
            continue
        low = token.lower().replace("’", "'")
        replacement: str | None = None
        if low in ("i", "we"):
            subject = "User" if low == "i" else we_as
            if used:
                replacement, pending, plural = "they", False, True
            else:
                replacement, pending, used = subject, True, True
            singular_active = pending
        elif low in ("i'm", "we're"):
            replacement = "they're" if used else ("User" if low == "i'm" else we_as) + " is"
            used, singular_active = True, not replacement.startswith("they")
        elif low in ("i've", "we've"):
            replacement = "they've" if used else ("User" if low == "i've" else we_as) + " has"
            used, singular_active = True, not replacement.startswith("they")
        elif low in ("i'd", "we'd"):
            replacement = "they'd" if used else ("User" if low == "i'd" else we_as) + " would"
            used = True
        elif low in ("i'll", "we'll"):
            replacement = "they'll" if used else ("User" if low == "i'll" else we_as) + " will"
            used = True
        elif low in ("my", "our"):
            if used:
                replacement = "their"
            else:
                replacement = "User's" if low == "my" else we_as + "'s"
                used = True
        elif low in ("me", "us"):
            replacement = "them"
        elif low in ("mine", "ours"):
            replacement = "theirs"
        elif low in ("myself", "ourselves"):
            replacement = "themselves"
        elif assistant and low in ("your", "yours"):
            replacement = "its"
        elif assistant and low in ("you", "yourself"):
            replacement = "itself" if low == "yourself" else "it"
        elif pending:
            if _is_adverb(low) or (past and low in _SAME_PAST):
                replacement, pending = token, pending and _is_adverb(low)
            else:
                replacement, pending = third_singular(token), False
        elif plural and low in _PLURAL:
            replacement = _PLURAL[low]
        elif after_conjunction and singular_active and low in COMMON_VERBS:
            replacement = third_singular(token)
        if low not in ("i", "we"):
            plural = plural and _is_adverb(low)
        after_conjunction = low in ("and", "or", "but")
        out.append(token if replacement is None else replacement)
    result = "".join(out).strip()
    return result[:1].upper() + result[1:]
