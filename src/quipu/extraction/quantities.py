"""Quantity slots: the attribute a measured statement is about (issue 24, knowledge updates).
Pure.

A user's knowledge updates are mostly quantities inside narratives: "I've been doing yoga
twice a week" and, months later, "I attend yoga classes, which is three times a week"; "I
currently have three bikes" and "I'll have four bikes with me"; "I got pre-approved for
$350,000" and "... pre-approved for $400,000". :func:`quantity_slot` reads a clause and names
the attribute measured — ``q:freq:yoga``, ``q:count:bike``, ``q:amount:pre-approved``,
``q:best:5k``, ``q:spent:sculpture``, and where a person the user names lives
(``q:home:friend rachel``) — so that the old and the new statement of one attribute
share a key and promotion's slot lookup supersedes the old fact with the new one.

The key is built from the measured thing only (never from the value), normalised: lower
case, generic words dropped ("classes", "sessions", "different"), the counted noun
singular. Different attributes never share a key: a count names its possessor ("my sister
has two kids" is ``q:count:sister:kid``, not the brother's), frequencies name the activity
or the person seen ("tennis" is not "table tennis"), a personal best names its race ("5k",
"marathon") and none is keyed when the race is not named.

:func:`quantity_findings` is the extractor's hook (revision 4): it tags the findings of a
clause that carry no slot of their own and, when no rule found anything in a first-person
clause that states a frequency or a count, emits the clause as a fact of its own.
"""

from __future__ import annotations

import re

from quipu.core.records import Kind
from quipu.extraction.rewrite import third_person
from quipu.extraction.statement import Finding, canonical

__all__ = ["quantity_findings", "quantity_slot"]


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_NUM_WORDS = (
    r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen"
    r"|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy"
    r"|eighty|ninety|hundred|a dozen|dozens of|a couple of|a few|several"
)
_NUMBER = rf"(?:\d[\d,.]*(?:\s?-\s?\d[\d,.]*)?|(?:{_NUM_WORDS})(?:[ -](?:{_NUM_WORDS}))?)"
_UNIT = r"(?:day|week|month|year|weekend|morning|evening|night)"
_FREQUENCY = re.compile(
    rf"\b(?:once|twice|thrice|{_NUMBER} times?|a couple (?:of )?times)"
    rf" (?:a|an|per|each|every) {_UNIT}\b"
    rf"|\bevery (?:other |single |{_NUMBER} )?{_UNIT}s?\b"
    r"|\b(?:daily|weekly|biweekly|fortnightly|monthly|yearly|annually|nightly)\b"
)
#: Words that never name what a frequency or a count is of.
_GENERIC = _set(
    """a an the my our your his her their its this that these those some any all each every
    other own new old different same more most many much few several total whole extra
    additional separate regular usual local good great nice little big long short
    i me we us you he she they it them one ones thing things stuff time times lot lots bit
    am is are was were be been being have has had having do does did doing done get got
    go goes going went gone make makes making made take takes taking took attend attends
    attending attended see sees seeing saw join joins joining joined try tries trying tried
    keep keeps keeping kept start started starting continue continued really actually also
    still just now currently usually normally typically generally always often sometimes
    around about roughly nearly almost over under up so far lately recently already
    class classes session sessions lesson lessons practice practices routine schedule
    appointment appointments visit visits meeting meetings habit habits workout workouts
    with at in on for to from of by about into like and or but than then which who where
    when while since because as if planning plan plans hoping hope want wants able need
    trying try love loves enjoy enjoys noticed notice think reminds remind myself yourself
    themselves ourselves himself herself"""
)
_STOP_AFTER = _set(
    "with at in on for to from of by into like and or but which who where when while since "
    "because as if so than"
)
_FREQUENCY_WORDS = _set(
    "once twice thrice times time a an per each every other single day days week weeks "
    "month months year years weekend weekends morning evening night daily weekly biweekly "
    "fortnightly monthly yearly annually nightly couple"
)
_NUMBERISH = re.compile(rf"^(?:{_NUMBER})$")
_SESSION_NOUN = (
    r"(?:sessions?|class(?:es)?|lessons?|games?|matches|practices|meetings?|calls?"
    r"|appointments?|workouts?)\b"
)
#: A count of these is not a count of anything ("two weeks ago", "a few ideas").
_NOT_COUNTED = _set(
    "second seconds minute minutes hour hours day days week weeks month months year years "
    "time times ago people way ways thing things idea ideas mile miles km kilometer "
    "kilometre pound pounds kg dollar dollars point points percent page"
)
_VAGUE = re.compile(r"^(?:a few|several|a couple of|dozens of|a dozen)$")
_POSSESSOR = re.compile(r"^(?:my|our) (?P<who>[a-z-]+(?: [a-z-]+)?) (?:has|have|owns|own)\b")
_FIRST_PERSON = re.compile(r"^(?:i|we)\b")
#: A possessive slot of the rules ("my sister has two kids": ``my:sister:has:``, "my sister
#: moved to Lyon": ``my:sister:moved:``), which the quantity slot names more precisely
#: (``q:count:sister:kid``, ``q:home:sister``).
_RETAG = re.compile(r"^my:[^:]+:(?:has|have|moved):")
#: "I have three bikes", "I've tried four", "that's 15 autographed baseballs", "a team of 5".
_COUNT = re.compile(
    rf"\b(?:have|has|own|owns|lead|leads|manage|manages|added|collected|tried|visited"
    rf"|read|finished|completed|adopted|team of|total of|group of)"
    rf"(?: (?:now|currently|already|so far|in total|actually|only|just))?"
    rf" (?:a team of |a total of |a group of |about |around |over |nearly |almost )?"
    rf"(?P<n>{_NUMBER}) (?P<np>[a-z][a-z' -]*)"
)
#: Counts that are events, not a running total of one attribute.
_EVENT_COUNT = re.compile(
    r"\b(?:bought|buy|buying|purchased|ordered|spent|paid|ate|drank|lost|sold|got|gave)\b"
)
_AMOUNT = re.compile(
    r"\b(?P<what>pre-?approved|approved|budget|salary|rent|mortgage|loan|savings|saved"
    r"|earn|earns|make|makes|raise|offer|deposit|down payment|limit|allowance|price)\b"
    r"[^$€£\d]{0,30}[$€£]\s?\d"
)
_BEST = re.compile(r"\b(?:personal best|personal record|\bpb\b|\bpr\b|best time|fastest time)")
_RACE = re.compile(
    r"\b(?P<race>half[ -]marathon|ultra[ -]?marathon|marathon|triathlon|\d+(?:\.\d+)?\s?k"
    r"|\d+(?:\.\d+)?[ -](?:mile|kilometre|kilometer|km)|mile|century ride|ironman)\b"
)
#: Where someone the user names lives now: "my friend Rachel moved back to the suburbs".
_MOVED = re.compile(
    r"^(?:my|our) (?P<who>[a-z-]+(?: [a-z'-]+)?) (?:recently |finally |since )?"
    r"(?:moved|relocated) (?:back |away |out )?(?:to|into|in) \S"
)
_SPENT = re.compile(
    rf"\b(?:spent|put in|invested|logged)(?: (?:around|about|roughly|over|nearly|almost))?"
    rf" {_NUMBER} (?:hours?|days?|weeks?|months?)"
    rf"(?: (?:on|into|working on) (?P<np>[a-z][a-z' -]*))?"
)
_ACTIVITY_VERB = re.compile(
    r"\b(?:do|does|doing|play|plays|playing|attend|attends|attending|practi[cs]e|practi[cs]ing"
    r"|go to|goes to|going to|take|takes|taking|visit|visits|visiting|train|trains|training"
    r"|swim|swims|swimming|run|runs|running|ride|rides|riding|have|has|having|call|calls"
    r"|calling|meet|meets|meeting)\b(?P<np>(?: [a-z'-]+){1,4})"
)
_TIME_WORDS = _set(
    "monday tuesday wednesday thursday friday saturday sunday today tonight tomorrow "
    "yesterday weekend weekends next last this morning evening night"
)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9][a-z0-9'-]*", text)


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word


def _head(np: str, *, limit: int = 3) -> str | None:
    """The measured thing of a noun phrase: its first content words (leading function and
    generic words skipped) up to a preposition or a generic word, the last word singular."""
    kept: list[str] = []
    for word in _words(np):
        if (
            word in _STOP_AFTER
            or word in _GENERIC
            or word in _TIME_WORDS
            or word in _FREQUENCY_WORDS
            or _NUMBERISH.match(word)
        ):
            if kept:
                break
            continue
        kept.append(word)
        if len(kept) == limit:
            break
    if not kept:
        return None
    kept[-1] = _singular(kept[-1])
    return " ".join(kept)


def _activity(body: str, canon: str) -> str | None:
    """What a frequency is of: a person named by title ("see Dr. Smith every week"); the noun
    after an adjective frequency ("my weekly tennis sessions"); the object of the nearest
    activity verb ("doing yoga twice a week", "attend yoga classes, which is three times a
    week", "play tennis ..., like we do every other week")."""
    titled = re.search(r"\b(?:Dr|Mr|Mrs|Ms|Prof|Coach)\.? (?P<name>[A-Z][a-z]+)", body)
    if titled:
        return titled["name"].lower()
    frequency = _FREQUENCY.search(canon)
    if frequency is None:
        return None
    if re.fullmatch(r"[a-z]+ly", frequency.group()):
        # "my weekly tennis sessions": the activity; "my daily commute", "my daily routine",
        # "The Daily Boost": no frequency of anything the user states
        after = re.match(r" (?:[a-z'-]+ ){0,2}?" + _SESSION_NOUN, canon[frequency.end() :])
        return _head(after.group(), limit=2) if after else None
    found = None
    for verb in _ACTIVITY_VERB.finditer(canon):
        head = _head(verb["np"], limit=2)
        useful = head and not set(head.split()) <= _FREQUENCY_WORDS
        if useful and (verb.start() < frequency.start() or found is None):
            found = head
    if found:
        return found
    words = [w for w in _words(canon[: frequency.start()]) if w not in _FREQUENCY_WORDS]
    return _head(" ".join(reversed(words)), limit=1)


#: A clause without any of these states no quantity (a cheap test before the real ones).
_MAYBE = re.compile(
    rf"\d|[$€£]|\b(?:{_NUM_WORDS}|once|twice|thrice|every|daily|weekly|biweekly|fortnightly"
    r"|monthly|yearly|annually|nightly|moved|relocated|personal best|personal record|pb|pr"
    r"|best time|fastest time)\b",
    re.IGNORECASE,
)


def quantity_slot(body: str, context: str = "") -> str | None:
    """The key of the attribute ``body`` (one clause, original case) measures, or None.
    ``context``: the turn's text before the clause (a personal best's race may be named
    there, "I'm training for another 5K ... I hope to beat my personal best of 25:50")."""
    if not _MAYBE.search(body):
        return None
    canon = canonical(body)
    moved = _MOVED.match(canon)
    if moved:
        return f"q:home:{moved['who']}"
    if _BEST.search(canon) and re.search(r"\d", canon):
        race = _RACE.search(canon) or _last(_RACE, canonical(context)[-300:])
        if race is None:
            return None
        return "q:best:" + re.sub(r"[\s-]+", "", race["race"]).replace("kilometre", "km")
    amount = _AMOUNT.search(canon)
    if amount:
        what = amount["what"].replace("preapproved", "pre-approved").replace(" ", "-")
        return f"q:amount:{'pre-approved' if what == 'pre-approved' else what}"
    spent = _SPENT.search(canon)
    if spent:
        head = _head(spent["np"] or "")
        return None if head is None else f"q:spent:{head}"
    if _FREQUENCY.search(canon):
        what = _activity(body, canon)
        return None if what is None else f"q:freq:{what}"
    count = _COUNT.search(canon)
    if count and not _EVENT_COUNT.search(canon[: count.start() + 12]):
        head = _head(count["np"])
        if head is None or _VAGUE.match(count["n"]) or head.split()[-1] in _NOT_COUNTED:
            return None
        owner = _POSSESSOR.match(canon)
        who = f"{owner['who']}:" if owner else ""
        return f"q:count:{who}{head}"
    return None


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    matches = list(pattern.finditer(text))
    return matches[-1] if matches else None


def quantity_findings(
    body: str, findings: list[Finding], *, we_as: str, context: str = ""
) -> list[Finding]:
    """The hook of extractor revision 4: ``findings`` of the clause ``body`` with the quantity
    slot on those that have none; when there are none and the clause is the user's own
    ("I ...", "we ...", "my X has ...") stating a frequency or a count, the clause itself as
    a fact carrying the slot."""
    slot = quantity_slot(body, context)
    if slot is None:
        return findings
    retag = [
        bool(f.slot and _RETAG.match(f.slot)) or (f.slot is None and f.kind is Kind.FACT)
        for f in findings
    ]
    if slot.startswith("q:home:") and not any(retag):
        # "My friend Rachel moved back to the suburbs": the rules read only the relation
        said = third_person(body, we_as=we_as)
        return [*findings, Finding(Kind.FACT, 0.65, said, slot=slot)]
    if findings:
        return [
            Finding(f.kind, f.confidence, f.text, slot, f.value, f.retraction) if again else f
            for f, again in zip(findings, retag, strict=True)
        ]
    canon = canonical(body)
    if _NOT_NOW.search(canon) and not _HABITUAL_ASIDE.search(canon):
        return findings
    if re.search(r"\b(?:last (?:week|month|weekend)|yesterday)\b", canon):
        return findings  # "I wore my loafers to work every day last week": a one-off
    mine = _FIRST_PERSON.match(canon) or _POSSESSOR.match(canon)
    if not (mine and slot.startswith(("q:freq:", "q:count:"))) and not (
        slot.startswith("q:best:") and re.match(r"(?:my|our) ", canon)
    ):
        return findings
    return [Finding(Kind.FACT, 0.6, third_person(body, we_as=we_as), slot=slot)]


_CUT = (
    r"(?=\s*(?:[,;:!?()]|\s-\s|\s–\s|\.(?:\s|$)|$)|\s+(?:which|that|like|so|because|but|since"
    r"|coming up|soon|this|next|last|today|tomorrow|tonight|and)\b)"
)
#: "I attend yoga classes, which is three times a week", "to play tennis with my friends ...,
#: like we do every other week", "I have a therapy session with Dr. Smith - it's every two weeks".
_SENTENCE_ACTIVITY = re.compile(
    r"\b(?:I|we|to) (?P<verb>attend|play|do|see|visit|take|have|practi[cs]e|meet|call|train"
    r"|swim|run|ride|go to) (?P<obj>[\w'.-]+(?: [\w'.-]+){0,7}?)" + _CUT,
    re.IGNORECASE,
)
#: "my own weekly tennis sessions with friends".
_SENTENCE_ADJECTIVE = re.compile(
    r"\bmy (?:own )?(?P<adj>daily|weekly|biweekly|fortnightly|monthly|nightly)"
    r" (?P<np>(?:[\w'-]+ ){0,2}?" + _SESSION_NOUN + r"(?: [\w'.-]+){0,3}?)" + _CUT,
    re.IGNORECASE,
)
#: A plan, a wish, a hedge or hearsay: not a value the user's attribute has now. The habitual
#: aside ("..., like we do every other week", "which is three times a week") still is one.
_NOT_NOW = re.compile(
    r"\b(?:will|would|going to|thinking|planning|plan to|try|trying|want|wants|hope|hoping"
    r"|like to|love to|heard|learned|considering|might|could|should|if|maybe|challenge|goal)\b"
)
_ASIDE = re.compile(r"(?:, (?:which is|like (?:i|we) do)|- it is)\b")
_HABITUAL_ASIDE = re.compile(r"\b(?:(?:like|as) (?:i|we) (?:usually |always )?do|which is)\b")
#: "it's a great addition to my collection - that's 15 autographed baseballs".
_SENTENCE_COLLECTION = re.compile(
    rf"\b(?:that's|that is|I have|I've got|I now have) (?P<n>{_NUMBER}) (?P<np>[\w' -]+?)" + _CUT,
    re.IGNORECASE,
)


def sentence_quantity(sentence: str) -> tuple[str, str] | None:
    """A frequency or a collection's count stated across the clauses of one sentence of the
    user's ("... when I attend yoga classes, which is three times a week"), as ``(fact text,
    slot)``; None when the sentence states none, or when it is a question or hypothetical.
    The extractor (revision 4) calls it only when the sentence's clauses gave no candidate
    with a quantity slot."""
    if "?" in sentence or not _MAYBE.search(sentence):
        return None
    canon = canonical(sentence)
    if "?" in sentence or (_NOT_NOW.search(canon) and not _HABITUAL_ASIDE.search(canon)):
        return None
    text = None
    frequency = _FREQUENCY.search(canon)
    if frequency is not None:
        adjective = _SENTENCE_ADJECTIVE.search(sentence)
        if adjective:
            text = f"User has {adjective['adj'].lower()} {adjective['np'].rstrip('.')}"
        else:
            for m in _SENTENCE_ACTIVITY.finditer(sentence):
                if _FREQUENCY.search(canonical(m["obj"])):
                    continue
                between = canonical(sentence[m.end() :])
                at = between.find(frequency.group())
                gap = between[:at] if at >= 0 else None
                if gap is None or (len(gap.split()) > 6 and not _ASIDE.search(gap)):
                    continue  # the frequency is of something else in the sentence
                said = third_person(f"I {m['verb'].lower()} {m['obj'].rstrip('.')}")
                text = f"{said} {frequency.group()}"
                break
    elif re.search(r"\bmy collection\b", sentence, re.IGNORECASE):
        count = _SENTENCE_COLLECTION.search(sentence)
        if count:
            text = f"User's collection has {count['n']} {count['np'].rstrip('.')}"
    if text is None or len(text.split()) > 20:
        return None
    slot = quantity_slot(text)
    return None if slot is None else (text, slot)
