"""Deterministic entity and fact extraction from one memory's text (GRAPH-1): no model call.

Sentences come from :func:`quipu.extraction.segment.sentences`. In each sentence:

- **Mentions** are runs of capitalised words (``of``, ``de``, ``the``, ``and`` may join two
  of them: "University of Michigan"), quoted titles, years and month names. A capitalised
  word that opens a sentence counts only when it is not a common word (:data:`_COMMON`).
  A leading ``Name:`` (a dialogue turn, "Caroline: I went ...") names the speaker, and the
  first person ("I", "me", "my") is that speaker; without one it is the scope owner's own
  entity, :data:`quipu.core.graph.SELF_NAME`.
- **Types** come from the words around a mention: a suffix ("University", "Park",
  "Festival"), a preposition cue ("in Paris", "at Google"), or the pattern that produced a
  fact; a single capitalised word in subject position is a person; otherwise ``other``.
- **Facts** come from a short list of patterns (:data:`_PATTERNS`), each naming its predicate:
  "X lives in Y", "X moved to Y", "X works at Y", "my sister Y", "X is married to Y",
  "X is from Y", "X was born in Y", "X visited Y", "X is 32 years old", "X works as a Y".

It is a recall aid, not a parser: precision and recall on a hand-labelled set of dialogue
sentences are in docs/benchmarks.md ("Entity graph extraction").
"""

from __future__ import annotations

import calendar
import re
import unicodedata
from dataclasses import dataclass
from importlib.resources import files

from quipu.core.graph import (
    MAX_NAME_CHARS,
    SELF_NAME,
    Extraction,
    FactDraft,
    Mention,
    folded_name,
)
from quipu.extraction.segment import sentences

__all__ = ["EXTRACTOR_ID", "common_word", "extract", "names_in"]

EXTRACTOR_ID = "graph-deterministic/1"
#: Text past this many characters is not read (a long document is not a memory).
MAX_CHARS = 8_000

_SPEAKER = re.compile(r"^\s*([A-Z][\w'’-]{0,40}(?: [A-Z][\w'’-]{0,40})?):\s+")
_WORD = r"[A-Z][\w'’&.-]*[\w]|[A-Z]"
_JOIN = r"(?:of|de|du|la|le|van|von|the|and|&)"
_NAME = re.compile(rf"(?<![\w'’])(?:{_WORD})(?:\s+(?:{_JOIN}\s+)?(?:{_WORD}))*")
_QUOTED = re.compile(r"[\"“]([A-Z][^\"”]{1,80}?)[\"”]")
_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_MONTHS = frozenset(calendar.month_name[1:]) | frozenset(calendar.month_abbr[1:])
_WEEKDAYS = frozenset(calendar.day_name)
#: Capitalised words that open sentences without naming anything.
_COMMON = frozenset(
    w
    for w in (files("quipu.graph") / "common_words.txt").read_text("utf-8").split()
    if not w.startswith("#")
)
_PLACE_SUFFIX = re.compile(
    r"\b(?:City|Town|Village|County|State|Street|St|Avenue|Road|Park|Lake|River|Beach|Island"
    r"|Islands|Mountains?|Mount|Valley|Bay|Coast|Canyon|Forest|Falls|Square|Hills?)$"
)
_ORG_SUFFIX = re.compile(
    r"\b(?:Inc|Corp|Corporation|Company|Co|Ltd|LLC|University|College|School|Academy|Institute"
    r"|Hospital|Clinic|Church|Club|Center|Centre|Foundation|Association|Society|Group|Team"
    r"|Agency|Bank|Studio|Studios|Library|Museum|Shelter|Council|Department|Lab|Labs)$"
)
_EVENT_SUFFIX = re.compile(
    r"\b(?:Festival|Conference|Parade|Pride|Marathon|Concert|Fair|Show|Expo|Summit|Cup"
    r"|Championship|Tournament|Race|Gala|Day|Con|Week|Olympics)$"
)
_PLACE_CUE = re.compile(
    r"(?:\b(?:in|to|from|near|visit(?:ed|ing)?|around|across|through|towards?)\s+(?:the\s+)?)$",
    re.IGNORECASE,
)
_ORG_CUE = re.compile(
    r"(?:\b(?:work(?:s|ed|ing)?\s+(?:at|for)|job\s+at|joined|employed\s+by|intern(?:ed|ing)?"
    r"\s+at|stud(?:y|ies|ied|ying)\s+at)\s+(?:the\s+)?)$",
    re.IGNORECASE,
)
_PERSON_CUE = re.compile(
    r"(?:\b(?:with|and|met|told|asked|called|named|friend|sister|brother|wife|husband|mom|mum"
    r"|dad|son|daughter|partner|boyfriend|girlfriend|cousin|aunt|uncle|niece|nephew|boss"
    r"|colleague|coworker|neighbou?r|mentor|grandma|grandpa|fiancée?|kids?)\s*,?\s*)$",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"^(?:i|me|my|myself|i'm|i’m|i've|i’ve|i'd|i'll)$", re.IGNORECASE)

_SUBJ = r"(?P<s>I|(?:[Tt]he )?[Uu]ser|[A-Z][\w'’-]+(?: [A-Z][\w'’-]+)?)"
_OBJ = r"(?:the\s+)?(?P<o>[A-Z][\w'’&.-]*(?:\s+(?:of\s+|de\s+)?[A-Z][\w'’&.-]*)*)"
_VERB_GAP = r"(?:\s+(?:just|recently|finally|now|still|also|currently|actually|already))?"
_RELATIONS = (
    "sister|brother|wife|husband|mom|mother|mum|dad|father|son|daughter|partner|boyfriend"
    "|girlfriend|cousin|aunt|uncle|niece|nephew|grandma|grandmother|grandpa|grandfather"
    "|friend|best friend|boss|colleague|coworker|neighbor|neighbour|mentor|dog|cat|puppy"
    "|kitten|fiancé|fiancée|fiance|fiancee|roommate"
)
_SPOUSE = frozenset({"wife", "husband"})
_PET = frozenset({"dog", "cat", "puppy", "kitten"})


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    cue: re.Pattern[str]
    """The pattern without its subject: searched first, as it is far cheaper to fail."""
    predicate: str
    object_type: str | None  # None: a literal value


def _p(body: str, predicate: str, object_type: str | None) -> _Pattern:
    """A fact pattern: ``body`` is what follows the subject (:data:`_SUBJ`)."""
    return _Pattern(re.compile(_SUBJ + body), re.compile(body), predicate, object_type)


_AM = r"(?:'m|’m|\s+am|\s+is|\s+are|'s|’s)"
#: The fact patterns, tried on every sentence in order (a sentence may yield several facts).
_PATTERNS = (
    _p(rf"{_VERB_GAP}\s+(?:live|lives|lived|living)\s+in\s+{_OBJ}", "lives_in", "place"),
    _p(
        rf"{_VERB_GAP}\s+(?:moved|relocated|am moving|is moving)\s+(?:back\s+)?to\s+{_OBJ}",
        "lives_in",
        "place",
    ),
    _p(
        rf"{_VERB_GAP}\s+(?:work|works|worked|am working|is working)\s+(?:at|for)\s+{_OBJ}",
        "works_at",
        "organisation",
    ),
    _p(
        rf"{_VERB_GAP}\s+(?:joined|got a job at|got hired at|started at)\s+{_OBJ}",
        "works_at",
        "organisation",
    ),
    _p(
        rf"{_VERB_GAP}\s+(?:stud(?:y|ies|ied)|am studying|is studying)\s+at\s+{_OBJ}",
        "studies_at",
        "organisation",
    ),
    _p(rf"{_AM}\s+(?:married|engaged)\s+to\s+{_OBJ}", "is_married_to", "person"),
    _p(rf"{_AM}\s+(?:dating|seeing)\s+{_OBJ}", "is_dating", "person"),
    _p(rf"{_AM}\s+(?:originally\s+)?from\s+{_OBJ}", "is_from", "place"),
    _p(rf"\s+(?:grew up|was raised)\s+in\s+{_OBJ}", "is_from", "place"),
    _p(rf"\s+(?:was|were)\s+born\s+in\s+{_OBJ}", "born_in", "place"),
    _p(
        rf"{_VERB_GAP}\s+(?:visited|went to|traveled to|travelled to|flew to|am going to"
        rf"|is going to|toured|explored)\s+{_OBJ}",
        "visited",
        "place",
    ),
    _p(rf"{_VERB_GAP}\s+(?:attended|went to see|performed at)\s+{_OBJ}", "attended", "event"),
    _p(rf"{_AM}\s+(?P<v>\d{{1,3}})\s+(?:years?\s+old|now)\b", "has_age", None),
    _p(
        r"\s+(?:work|works|worked|am working|is working)\s+as\s+(?:an?\s+)?"
        r"(?P<v>[a-z][a-z -]{2,40}?)(?=[.,;!?]|\s+(?:at|for|in|and|since)\b|$)",
        "has_job",
        None,
    ),
    _p(
        rf"{_VERB_GAP}\s+(?:adopted|got|have|has)\s+an?\s+(?:new\s+)?(?:dog|cat|puppy|kitten)"
        rf"\s+(?:named|called)\s+{_OBJ}",
        "has_pet",
        "other",
    ),
)
_RELATION = re.compile(
    rf"\b(?P<poss>[Mm]y|(?P<owner>[A-Z][\w-]+)['’]s)\s+(?:(?:best|older|younger|little|big|twin"
    rf"|new)\s+)?(?P<rel>{_RELATIONS})\s*,?\s+(?:named\s+|called\s+)?(?P<o>[A-Z][\w'’-]+"
    rf"(?:\s+[A-Z][\w'’-]+)?)"
)


def extract(text: str) -> Extraction:
    """The mentions and facts of one memory's text (no model call; deterministic). The text is
    read NFKC-normalised (full-width letters as ASCII)."""
    text = unicodedata.normalize("NFKC", text[:MAX_CHARS])
    speaker = None
    found = _SPEAKER.match(text)
    if found and found.group(1).split(" ")[0].lower() not in _COMMON:
        speaker = found.group(1)
        text = text[found.end() :]
    builder = _Builder()
    self_name = speaker or SELF_NAME
    if speaker is not None:
        builder.mention(speaker, "person")
    for span in sentences(text):
        _sentence(span.text, builder, self_name)
    return Extraction(tuple(builder.mentions), tuple(builder.facts), EXTRACTOR_ID)


class _Builder:
    def __init__(self) -> None:
        self.mentions: list[Mention] = []
        self.index: dict[str, int] = {}
        self.facts: list[FactDraft] = []
        self.seen: set[tuple[int, str, int | None, str | None]] = set()

    def mention(self, name: str, kind: str) -> int:
        name = name.strip()[:MAX_NAME_CHARS]
        key = folded_name(name)
        at = self.index.get(key)
        if at is not None:
            if self.mentions[at].type == "other" and kind != "other":
                self.mentions[at] = Mention(self.mentions[at].name, kind)
            return at
        self.mentions.append(Mention(name, kind))
        self.index[key] = len(self.mentions) - 1
        return len(self.mentions) - 1

    def fact(self, subject: int, predicate: str, obj: int | None, value: str | None) -> None:
        if obj == subject:
            return
        key = (subject, predicate, obj, value)
        if key not in self.seen:
            self.seen.add(key)
            self.facts.append(FactDraft(subject, predicate, obj, value))


_LEAD_SUBJECT = re.compile(rf"^{_SUBJ}\s+[a-z]")
#: "X lives in Y and works at Z": a verb after "and" shares the sentence's first subject.
_AND_VERB = re.compile(r"(?:,\s*|\s+)and\s+(?=(?:also\s+|now\s+)?[a-z]+(?:s|ed)\b)")


def _clauses(sentence: str) -> list[str]:
    """The sentence, and each "and <verb> ..." clause with the sentence's subject put back."""
    lead = _LEAD_SUBJECT.match(sentence)
    if lead is None:
        return [sentence]
    found = [sentence]
    for match in _AND_VERB.finditer(sentence):
        found.append(f"{lead.group('s')} {sentence[match.end() :]}")
    return found


def _sentence(sentence: str, builder: _Builder, self_name: str) -> None:
    for name, kind in _names(sentence):
        builder.mention(name, kind)
    for clause in _clauses(sentence):
        _facts(clause, builder, self_name)


def _facts(sentence: str, builder: _Builder, self_name: str) -> None:
    for pattern in _PATTERNS:
        if pattern.cue.search(sentence) is None:
            continue
        for match in pattern.regex.finditer(sentence):
            subject = _subject(match.group("s"), self_name)
            if subject is None:
                continue
            s = builder.mention(subject, "person")
            if pattern.object_type is None:
                value = match.group("v").strip()
                builder.fact(s, pattern.predicate, None, value)
                continue
            obj = _trim(match.group("o"))
            if obj is None:
                continue
            kind = _type_of(obj, "") if pattern.object_type == "place" else pattern.object_type
            if pattern.object_type == "place" and kind in ("other", "person"):
                kind = "place"
            builder.fact(s, pattern.predicate, builder.mention(obj, kind), None)
    if "my " not in sentence.lower() and "s " not in sentence:
        return
    for match in _RELATION.finditer(sentence):
        owner = self_name if match.group("owner") is None else match.group("owner")
        if folded_name(owner) in _COMMON and owner != self_name:
            continue
        obj = _trim(match.group("o"))
        if obj is None:
            continue
        rel = match.group("rel").lower().replace(" ", "_")
        s = builder.mention(owner, "person")
        if rel in _SPOUSE:
            builder.fact(s, "is_married_to", builder.mention(obj, "person"), None)
        elif rel in _PET:
            builder.fact(s, "has_pet", builder.mention(obj, "other"), None)
        else:
            builder.fact(s, f"has_{rel}", builder.mention(obj, "person"), None)


def _subject(word: str, self_name: str) -> str | None:
    if _FIRST_PERSON.match(word) or folded_name(word) == SELF_NAME:
        return self_name
    if folded_name(word.split(" ", maxsplit=1)[0]) in _COMMON:
        return None
    return word


def _trim(name: str) -> str | None:
    """An object name without trailing common words ("Paris Last" -> "Paris")."""
    words = name.split()
    while words and words[-1].lower().strip(".") in _COMMON:
        words.pop()
    if not words or folded_name(words[0]) in _COMMON:
        return None
    return " ".join(words).rstrip(".")


def common_word(word: str) -> bool:
    """Whether ``word`` is a common word that names nothing (:data:`_COMMON`)."""
    return word.lower() in _COMMON


def names_in(sentence: str) -> list[tuple[str, str]]:
    """The (name, type) mentions of one sentence."""
    return _names(sentence)


def _names(sentence: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for match in _QUOTED.finditer(sentence):
        found.append((match.group(1).strip(), "product"))
    for match in _YEAR.finditer(sentence):
        found.append((match.group(0), "date"))
    for match in _NAME.finditer(sentence):
        words = match.group(0).split()
        start = match.start()
        # Drop leading common words ("The", "My", a sentence opener) and trailing ones.
        while words and words[0].lower().strip("'’") in _COMMON:
            start += len(words[0]) + 1
            words.pop(0)
        while words and (words[-1].lower() in _COMMON or words[-1].lower() in ("of", "and")):
            words.pop()
        if not words:
            continue
        name = " ".join(words).rstrip(".")
        if name in _MONTHS or name in _WEEKDAYS:
            found.append((name, "date"))
            continue
        if len(name) < 2 or (name.isupper() and len(name) > 6):
            continue
        found.append((name, _type_of(name, sentence[:start])))
    return found


def _type_of(name: str, before: str) -> str:
    if _ORG_SUFFIX.search(name):
        return "organisation"
    if _EVENT_SUFFIX.search(name):
        return "event"
    if _PLACE_SUFFIX.search(name):
        return "place"
    if _ORG_CUE.search(before):
        return "organisation"
    if _PERSON_CUE.search(before):
        return "person"
    if _PLACE_CUE.search(before):
        return "place"
    if " " not in name:
        return "other" if name.isupper() else "person"
    return "other"
