"""The statement rules of the deterministic extractor. Pure.

Each rule reads a :class:`~quipu.extraction.statement.Statement` and returns a
:class:`~quipu.extraction.statement.Finding` or None; :data:`RULES` holds them in the
order :func:`quipu.extraction.classify.classify` tries them.

Matching runs on a *canonical* copy of the clause (lower case, contractions expanded);
text is written from the original clause, so names keep their case.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from quipu.core.records import Kind
from quipu.extraction.lexicon import (
    ABSOLUTE_DATE,
    ADV,
    CHOICE_VERBS,
    DAY_OR_MONTH,
    DEICTIC,
    DURABLE_STATES,
    EPHEMERAL_ACTION,
    EVALUATIVE,
    FAMILY_CONTEXT,
    FEEDBACK_OBJECT,
    GOAL_VERBS,
    HABITUAL,
    HAVE_EXCLUDED,
    MY_EXCLUDED,
    NOT_NAMES,
    ONGOING,
    PERFECT,
    PLAN_NOUNS,
    PLAN_PROGRESSIVE,
    PREF_NEGATIVE,
    PREF_POSITIVE,
    ROLE_EXCLUDED,
    ROUTINE_QUANTITY,
    SCHEDULED,
    STRONG_PLAN,
    TIMELY,
    TRANSIENT_STATES,
    WORK_CONTEXT,
)
from quipu.extraction.rewrite import IRREGULAR_PAST, third_person
from quipu.extraction.statement import Finding, Statement

__all__ = ["RULES", "text_of", "value_after"]


# "I love that idea", "I like the sound of it": feedback on the conversation, not a taste.


def context_for_we(text: str) -> str | None:
    """ "User's team" or "User's family" when ``text`` says which, else None."""
    family = len(FAMILY_CONTEXT.findall(text))
    work = len(WORK_CONTEXT.findall(text))
    if family > work:
        return "User's family"
    if work > family:
        return "User's team"
    return None


Rule = Callable[[Statement], Finding | None]
RULES: list[Rule] = []


def _rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


def text_of(s: Statement, *, assistant: bool = False) -> str:
    return third_person(s.body, we_as=s.we_as, assistant=assistant)


def value_after(body: str, canon_value: str) -> str | None:
    """The original-case text of ``canon_value`` found in ``body``."""
    index = body.lower().find(canon_value.strip())
    if index < 0:
        return canon_value.strip() or None
    return body[index : index + len(canon_value.strip())]


def _shape(word: str, body: str) -> str:
    """A coarse type for the first word of a value: NAME, NUM or the word itself."""
    if not word:
        return ""
    if word[0].isdigit():
        return "NUM"
    original = re.search(rf"\b{re.escape(word)}\b", body, re.IGNORECASE)
    if original and original.group()[0].isupper():
        return "NAME"
    return word


def _slot_value(rest: str) -> str:
    """The shape of a predicate for slot keys: dates and times all share one shape."""
    words = rest.split()
    if DAY_OR_MONTH.match(rest):
        return "WHEN"
    return words[0] if words else ""


# --------------------------------------------------------------------------- rules


@_rule
def _name(s: Statement) -> Finding | None:
    m = re.match(
        r"^(?:my name is|my name's|call me|i am|this is|name is)\s+(?P<name>[\w'-]+(?: [\w'-]+)?)$",
        s.canon,
    )
    if not m:
        return None
    name = value_after(s.body, m["name"]) or ""
    if not all(part[:1].isupper() for part in name.split()):
        return None
    if s.canon.startswith(("i am", "this is")) and re.search(r"(?:ian|ese|ish|ch)$", name.lower()):
        return Finding(Kind.FACT, 0.7, f"User is {name}", slot="identity", value=name)
    return Finding(Kind.FACT, 0.85, f"User's name is {name}", slot="name", value=name)


@_rule
def _favourite(s: Statement) -> Finding | None:
    m = re.match(
        r"^(?:my|our) (?:all[- ]time )?favou?rite (?P<what>.+?) (?:is|are) (?P<obj>.+)$", s.canon
    )
    if m:
        return Finding(
            Kind.PREFERENCE,
            0.85,
            text_of(s),
            slot=f"favourite:{m['what']}",
            value=value_after(s.body, m["obj"]),
        )
    m = re.match(
        r"^(?P<obj>.+?) (?:is|are) (?:my|our) (?:all[- ]time )?favou?rite\b(?P<rest>.*)$", s.canon
    )
    if m and not DEICTIC.match(m["obj"]):
        return Finding(Kind.PREFERENCE, 0.8, text_of(s), value=value_after(s.body, m["obj"]))
    return None


@_rule
def _preference_verb(s: Statement) -> Finding | None:
    m = re.match(
        rf"^(?P<subj>i|we){ADV}(?: (?P<habit>always|usually|generally|typically|normally))?"
        rf" (?P<verb>{PREF_NEGATIVE}|{PREF_POSITIVE})\b (?P<obj>.+)$",
        s.canon,
    )
    if not m or DEICTIC.match(m["obj"]):
        return None
    if FEEDBACK_OBJECT.match(m["obj"]):
        return None
    verb = m["verb"]
    confidence = 0.85
    if verb.startswith(("am fine", "am ok", "am okay", "am happy", "avoid", "tend", "dig")):
        confidence = 0.7
    if verb == "like" and m["obj"].startswith("to "):
        confidence = 0.8
    return Finding(Kind.PREFERENCE, confidence, text_of(s), value=value_after(s.body, m["obj"]))


@_rule
def _third_party_preference(s: Statement) -> Finding | None:
    m = re.match(
        r"^(?:my|our) (?P<who>(?:[\w-]+ ){0,2}?[\w-]+) (?:really |also |absolutely )?"
        r"(?P<verb>prefers|likes|loves|adores|enjoys|hates|dislikes|can not stand|does not like"
        r"|is (?:obsessed with|into|allergic to|a (?:big |huge )?fan of))\b (?P<obj>.+)$",
        s.canon,
    )
    if not m or MY_EXCLUDED.match(m["who"]) or DEICTIC.match(m["obj"]):
        return None
    kind = Kind.FACT if "allergic" in m["verb"] else Kind.PREFERENCE
    return Finding(kind, 0.75, text_of(s), slot=None, value=value_after(s.body, m["obj"]))


@_rule
def _habit(s: Statement) -> Finding | None:
    m = re.match(
        rf"^(?:i|we){ADV} (?P<freq>always|usually|typically|normally|generally|tend to"
        rf"|almost always"
        rf"|never|rarely|often|mostly|regularly)(?:{ADV}) (?P<verb>[\w-]+(?: (?:up|to"
        rf"|for))?)\b(?P<rest>.*)$",
        s.canon,
    )
    if not m:
        return None
    verb = m["verb"]
    if re.match(
        r"^(?:forget|forgot|mix|mess|lose|miss|get lost|fall|wonder|think|thought|knew|know|believe"
        r"|believed|assume|assumed|feel|felt|say|said|ask|asked|wanted|want|hope|hoped|wish"
        r"|struggle|struggled|have trouble|have a hard time|fail|failed|end up (?!order)|seem)\b",
        verb,
    ):
        return None
    if DEICTIC.match(m["rest"].strip()) and m["rest"].strip():
        return None
    if verb in ("try to", "tend to") or re.match(rf"^(?:{PREF_NEGATIVE}|{PREF_POSITIVE})\b", verb):
        return Finding(Kind.PREFERENCE, 0.7, text_of(s), value=m["rest"].strip() or None)
    if re.match(rf"^(?:{CHOICE_VERBS})\b", verb):
        return Finding(Kind.PREFERENCE, 0.7, text_of(s), value=m["rest"].strip() or None)
    return Finding(Kind.FACT, 0.65, text_of(s), value=m["rest"].strip() or None)


@_rule
def _decided(s: Statement) -> Finding | None:
    m = re.match(
        rf"^(?P<subj>i|we){ADV}(?: have| had)?{ADV} (?P<verb>decided|chose|have chosen|agreed"
        r"|settled on|committed to|opted|made the decision|picked|went with|are going with"
        r"|am going with|are going to go with|are sticking with|am sticking with|will go with"
        r"|will stick with|will use|are switching to|am switching to|switched to|signed up for"
        r"|booked|have booked|are doing|are using|will be using"
        r"|are standardi[sz]ing on)\b(?P<rest>.*)$",
        s.canon,
    )
    if not m:
        return None
    rest = m["rest"].strip()
    if not rest or DEICTIC.match(re.sub(r"^(?:to|on|that|for) ", "", rest)):
        return None
    if m["verb"] in ("are doing", "are using", "will use", "will be using") and not rest:
        return None
    return Finding(Kind.DECISION, 0.85, text_of(s), slot=None, value=value_after(s.body, rest))


@_rule
def _lets(s: Statement) -> Finding | None:
    m = re.match(
        r"^(?:ok |okay |so |then )?let's (?:just |also |definitely )?(?P<verb>go with|go for|use"
        r"|pick"
        r"|choose|stick with|stick to|switch to|move to|adopt|book|keep|plan on|plan for|aim for"
        r"|target|schedule|set|standardi[sz]e on|do|make|call it|name it|try)\b (?P<obj>.+)$",
        s.canon,
    )
    if not m or DEICTIC.match(m["obj"]) or len(m["obj"]) < 3:
        return None
    if m["verb"] in ("do", "make", "try") and not re.search(r"[A-Z0-9]", s.body[4:]):
        return None
    index = s.body.lower().find(m["verb"])
    rest = third_person(s.body[index:], we_as=s.we_as)
    rest = rest[:1].lower() + rest[1:]
    return Finding(Kind.DECISION, 0.8, f"Decided to {rest}", value=value_after(s.body, m["obj"]))


@_rule
def _moved_or_lives(s: Statement) -> Finding | None:
    m = re.match(
        rf"^(?P<subj>i|we){ADV}(?: have| had)?{ADV} (?P<verb>live|lived|reside|am based|are based"
        r"|am located|are located|am living|are living|have lived|have been living|grew up|was born"
        r"|were born|come from|moved|have moved|relocated|emigrated|immigrated|am originally from"
        r"|are originally from)\b(?P<rest>.*)$",
        s.canon,
    )
    if not m:
        return None
    rest = m["rest"].strip()
    if not rest or re.match(r"^(?:here|there|it|this|that)\b", rest):
        return None
    if m["verb"] in ("lived",) and not re.search(r"\bfor \w+ years\b", rest):
        return Finding(Kind.FACT, 0.6, text_of(s), slot="lived", value=value_after(s.body, rest))
    slot = "born" if "born" in m["verb"] else "grew" if "grew" in m["verb"] else "live"
    if m["subj"] == "we":
        s = Statement(body=s.body, canon=s.canon, we_as="User's family")
    value = re.sub(r"^(?:in|at|to|near|outside|from|out of|back to|over to) ", "", rest)
    confidence = 0.9 if m["verb"] in ("live", "am based", "are based", "am living") else 0.85
    return Finding(Kind.FACT, confidence, text_of(s), slot=slot, value=value_after(s.body, value))


@_rule
def _at_place(s: Statement) -> Finding | None:
    m = re.match(rf"^(?P<subj>i|we){ADV} (?:am|are) (?P<prep>in|at) (?P<place>.+)$", s.canon)
    if not m:
        return None
    place = value_after(s.body, m["place"]) or ""
    if not place[:1].isupper():
        return None
    slot = "live" if m["prep"] == "in" else "work"
    return Finding(Kind.FACT, 0.65 if slot == "live" else 0.7, text_of(s), slot=slot, value=place)


@_rule
def _works(s: Statement) -> Finding | None:
    m = re.match(
        rf"^(?P<subj>i|we){ADV}(?: have| had)?{ADV} (?P<verb>work|worked|am working"
        rf"|have been working"
        r"|teach|study|studied|graduated|run|own|manage|lead|founded|co-founded|am employed"
        r"|report to|freelance|consult|volunteer)\b(?P<rest>.*)$",
        s.canon,
    )
    if not m:
        return None
    rest = m["rest"].strip()
    if (
        not rest
        or DEICTIC.match(rest)
        or re.match(r"^(?:on (?:it|this|that)|it|this|that)\b", rest)
    ):
        return None
    if m["verb"] == "am working" and not re.match(r"^(?:at|for|as|in|remotely|from|with)\b", rest):
        return None
    if re.match(r"^(?:into|out of|late|hard|too)\b", rest):
        return None
    slot = (
        "work"
        if m["verb"] in ("work", "am working", "am employed") and rest.startswith(("at", "for"))
        else None
    )
    confidence = 0.85 if slot else 0.75
    if m["verb"] == "worked":
        confidence = 0.6
    return Finding(Kind.FACT, confidence, text_of(s), slot=slot, value=value_after(s.body, rest))


@_rule
def _plan(s: Statement) -> Finding | None:
    m = re.match(
        rf"^(?P<subj>i|we){ADV} (?P<aux>am going to|are going to|am planning to|are planning to"
        r"|am planning on|are planning on|plan to|intend to|am intending to|will|shall|am about to"
        r"|are about to|am set to|are set to|am hoping to|are hoping to|hope to|aim to|want to"
        r"|am aiming to|are aiming to|expect to|am determined to)\b(?: be)?(?P<rest>.*)$",
        s.canon,
    )
    if not m:
        return None
    rest = m["rest"].strip()
    timely = bool(TIMELY.search(s.canon))
    if not rest or EPHEMERAL_ACTION.match(rest):
        return None
    if re.match(r"^(?:\w+ )?(?:it|this|that)\b", rest) and not (
        timely or re.search(r"[A-Z0-9]", s.body[s.body.lower().find(rest[:4]) :])
    ):
        return None
    aux = m["aux"]
    if aux in ("want to", "hope to", "am hoping to", "are hoping to"):
        if not GOAL_VERBS.match(rest) or len(rest.split()) < 2 or re.match(r"^\w+ more\b", rest):
            return None
        return Finding(Kind.DECISION, 0.55, text_of(s), value=value_after(s.body, rest))
    if (
        aux in ("will", "shall")
        and not timely
        and not re.match(
            r"^(?:staying|stay|be staying|start|move|join|launch|quit|retire|visit|travel|fly|call"
            r"|name"
            r"|use|switch|go with|stick with|keep|stay)\b",
            rest,
        )
    ):
        return None
    confidence = 0.8 if timely else 0.7
    if aux in ("am about to", "are about to") and not timely:
        return None
    return Finding(Kind.DECISION, confidence, text_of(s), value=value_after(s.body, rest))


@_rule
def _progressive(s: Statement) -> Finding | None:
    m = re.match(rf"^(?P<subj>i|we){ADV} (?:am|are){ADV} (?P<verb>\w+ing)\b(?P<rest>.*)$", s.canon)
    if not m:
        return None
    verb, rest = m["verb"], m["rest"].strip()
    phrase = f"{verb} {rest}".strip()
    if re.match(rf"^(?:{PLAN_PROGRESSIVE})\b", phrase) and (
        TIMELY.search(s.canon) or STRONG_PLAN.match(phrase)
    ):
        if re.match(
            r"^(?:going|heading|coming) (?:to )?(?:grab|get|bed|sleep|home|out|back|have)\b", phrase
        ):
            return None
        return Finding(Kind.DECISION, 0.75, text_of(s), value=value_after(s.body, rest))
    if ROUTINE_QUANTITY.search(phrase):
        return Finding(Kind.FACT, 0.65, text_of(s), value=value_after(s.body, rest))
    if (
        re.match(rf"^(?:{ONGOING})\b", phrase)
        and rest
        and not re.match(r"^(?:on )?(?:it|this|that)\b", rest)
    ):
        if verb == "working" and not re.match(r"^(?:on|at|for|as|with|remotely)\b", rest):
            return None
        return Finding(Kind.FACT, 0.6, text_of(s), value=value_after(s.body, rest))
    if TIMELY.search(s.canon) and not re.match(
        r"^(?:trying|looking|wondering|thinking|hoping|asking|reading|watching|checking|doing (?:it"
        r"|this"
        r"|that)|working on (?:it|this|that)|going to (?:grab|get|bed|sleep)|getting|feeling|having"
        r" (?:a|an|some|lunch|dinner|breakfast|fun|trouble|issues?|problems?))\b",
        phrase,
    ):
        return Finding(Kind.DECISION, 0.65, text_of(s), value=value_after(s.body, rest))
    return None


@_rule
def _no_longer(s: Statement) -> Finding | None:
    m = re.match(
        rf"^(?P<subj>i|we){ADV} (?:do not|does not|no longer|am not|are not|have not|never)"
        rf"{ADV} (?P<verb>[\w-]+)\b(?P<rest>.*?) (?:any ?more|any longer)$",
        s.canon,
    ) or re.match(rf"^(?P<subj>i|we){ADV} no longer (?P<verb>[\w-]+)\b(?P<rest>.*)$", s.canon)
    if not m:
        return None
    verb = m["verb"]
    slot = "live" if verb in ("live", "reside") else "work" if verb in ("work",) else None
    positive = re.sub(
        r"\b(?:do not|no longer|any ?more|any longer)\b\s*", "", s.body, flags=re.IGNORECASE
    )
    positive = re.sub(r"\bdon't\s+|\bdon’t\s+", "", positive, flags=re.IGNORECASE)
    old = third_person(positive.strip(" ,."), we_as=s.we_as)
    return Finding(
        Kind.FACT,
        0.75,
        old,
        slot=slot,
        value=value_after(s.body, m["rest"].strip()),
        retraction=True,
    )


@_rule
def _used_to(s: Statement) -> Finding | None:
    m = re.match(rf"^(?P<subj>i|we){ADV} used to (?P<verb>[\w-]+)\b(?P<rest>.*)$", s.canon)
    if not m:
        return None
    verb = m["verb"]
    slot = "live" if verb in ("live", "reside") else "work" if verb == "work" else None
    return Finding(
        Kind.FACT,
        0.6,
        text_of(s),
        slot=slot,
        value=value_after(s.body, m["rest"].strip()),
        retraction=True,
    )


@_rule
def _negative_habit(s: Statement) -> Finding | None:
    m = re.match(
        rf"^(?:i|we){ADV} (?:do not|never|can not|no longer){ADV} (?P<verb>drink|eat|smoke|drive"
        r"|fly|own|have|use|watch|celebrate|work on weekends|do drugs|vape|eat meat"
        r"|speak)\b(?P<rest>.*)$",
        s.canon,
    )
    if not m:
        return None
    rest = m["rest"].strip()
    if DEICTIC.match(rest) or (m["verb"] == "have" and HAVE_EXCLUDED.match(rest)):
        return None
    return Finding(Kind.FACT, 0.8, text_of(s), value=value_after(s.body, rest))


@_rule
def _identity(s: Statement) -> Finding | None:
    m = re.match(rf"^(?P<subj>i|we){ADV} (?:am|are){ADV} (?P<pred>.+)$", s.canon)
    if not m:
        return None
    pred = m["pred"]
    if DURABLE_STATES.match(pred):
        slot = (
            "age"
            if pred[:1].isdigit()
            else "origin"
            if pred.startswith(("from ", "originally"))
            else None
        )
        return Finding(Kind.FACT, 0.85, text_of(s), slot=slot, value=value_after(s.body, pred))
    if TRANSIENT_STATES.match(pred):
        return None
    if re.match(r"^(?:a|an|the) ", pred) and not ROLE_EXCLUDED.match(pred):
        # "I'm a nurse in Manchester", "I'm the tech lead for the payments team"
        if re.search(r"\b(?:person who|kind of person|bit of|type of)\b", pred) and len(pred) < 12:
            return None
        return Finding(Kind.FACT, 0.8, text_of(s), slot="role", value=value_after(s.body, pred))
    if re.match(r"^(?:still|now|currently)? ?(?:at|with|on) [a-z]", pred) and re.search(
        r"\b[A-Z]", s.body[2:]
    ):
        return Finding(Kind.FACT, 0.7, text_of(s), slot="work", value=value_after(s.body, pred))
    return None


@_rule
def _experience(s: Statement) -> Finding | None:
    m = re.match(
        rf"^(?:i|we){ADV} have been{ADV} (?P<pred>.+?) (?P<dur>(?:for (?:about |almost |over "
        rf"|nearly"
        r" |more than |the (?:past|last) )?(?:\w+ )?(?:years?|months?|decades?|ages|a while"
        r"|a long time"
        r"|\d+ (?:years?|months?))|since (?:\d{4}|i was|we were|high school|college|university"
        r"|childhood"
        r"|birth|forever|the \d{4}s|\w+ \d{4})))\b(?P<rest>.*)$",
        s.canon,
    )
    if (
        m
        and not TRANSIENT_STATES.match(m["pred"])
        and not re.match(
            r"^(?:waiting|trying|looking|thinking|stuck|meaning|wanting|wondering)\b", m["pred"]
        )
    ):
        return Finding(Kind.FACT, 0.8, text_of(s), value=value_after(s.body, m["pred"]))
    m = re.match(
        rf"^(?:i|we){ADV} have been{ADV} (?P<verb>using|learning|studying|training|practicing"
        r"|practising|collecting|volunteering|taking|playing|working (?:at|for|as|on)|saving"
        r"|attending"
        r"|following|dating|living|cooking|baking|growing|renovating|running|teaching|writing"
        r"|building|raising|caring for|going to|listening to|watching|reading"
        r"|doing)\b (?P<obj>.+)$",
        s.canon,
    )
    if not m or DEICTIC.match(m["obj"]) or re.match(r"^(?:it|this|that|them)\b", m["obj"]):
        return None
    return Finding(Kind.FACT, 0.6, text_of(s), value=value_after(s.body, m["obj"]))


@_rule
def _have(s: Statement) -> Finding | None:
    m = re.match(
        rf"^(?P<subj>i|we){ADV} (?P<verb>have got|have|got|own|adopted|just adopted|bought"
        rf"|just bought"
        r"|rescued|inherited|raise|keep|share)\b (?P<obj>.+)$",
        s.canon,
    )
    if not m:
        return None
    obj = m["obj"]
    if HAVE_EXCLUDED.match(obj) or DEICTIC.match(obj):
        return None
    if m["verb"] == "have" and PERFECT.match(obj):
        if re.match(
            r"^(?:lived|worked|studied|visited|run|completed|finished|published|won|owned|taught"
            r"|volunteered)\b",
            obj,
        ):
            return Finding(Kind.FACT, 0.6, text_of(s), value=value_after(s.body, obj))
        return None
    if m["verb"] == "got" and not re.match(
        r"^(?:a|an|two|three|\d+) (?:dog|cat|puppy|kitten|car|house|new job|job|promotion|degree"
        r"|diagnos)",
        obj,
    ):
        return None
    if m["verb"] in ("keep", "share") and not re.match(r"^(?:a|an|two|three|\d+) ", obj):
        return None
    confidence = 0.75 if m["verb"] in ("have", "have got", "own") else 0.7
    return Finding(Kind.FACT, confidence, text_of(s), value=value_after(s.body, obj))


@_rule
def _activity(s: Statement) -> Finding | None:
    m = re.match(
        rf"^(?P<subj>i|we){ADV} (?P<verb>speak|drive|use|play|practice|practise|sing|paint|cook"
        rf"|bake"
        r"|knit|climb|surf|ski|swim|cycle|bike|run|go running|go to|go swimming|go climbing|attend"
        r"|belong to|support|follow|code|program|deploy|host|ship|build|maintain|develop|write"
        r"|are on"
        r"|am on|rely on|commute|rent|meditate|do yoga|train|walk|sit|sleep|wake up|get up|meet"
        r"|gather"
        r"|get together|hang out|go out|eat out|work out|play)\b(?P<rest>.*)$",
        s.canon,
    )
    if not m:
        return None
    rest = m["rest"].strip()
    if not rest and m["verb"] not in ("meditate", "do yoga", "ski", "surf", "cook", "bake"):
        return None
    if re.match(r"^(?:it|this|that|them)\b", rest) or DEICTIC.match(rest):
        return None
    if m["verb"] in ("am on", "are on") and not re.search(r"[A-Z0-9]", s.body[3:]):
        return None
    if m["verb"] in (
        *("write", "build", "go to", "walk", "sleep", "sit", "get up", "wake up", "meet", "gather"),
        *("get together", "hang out", "go out", "eat out", "work out"),
    ) and not re.search(
        r"\b(?:every|each|daily|weekly|usually|always|on (?:the )?\w+ floor|for a living"
        r"|professionally"
        r"|\d+ times)\b|\bfloor\b",
        s.canon,
    ):
        return None
    return Finding(Kind.FACT, 0.7, text_of(s), value=value_after(s.body, rest))


@_rule
def _routine(s: Statement) -> Finding | None:
    """ "We open at 6am every day", "I only go in on Tuesdays": a routine."""
    m = re.match(
        rf"^(?:i|we){ADV} (?:only |usually |still )?(?P<verb>[a-z]+)\b(?P<rest>.*)$", s.canon
    )
    if not m or not HABITUAL.search(m["rest"]) or m["verb"] in IRREGULAR_PAST:
        return None
    if m["verb"].endswith("ed") or re.match(
        r"^(?:am|are|was|were|had|did|think|feel|need|want|know|guess|hope|wonder|forget|miss"
        r"|can|could|would|should|might|may|must|will|shall)$",
        m["verb"],
    ):
        return None
    return Finding(Kind.FACT, 0.65, text_of(s), value=value_after(s.body, m["rest"].strip()))


@_rule
def _tooling(s: Statement) -> Finding | None:
    """ "I do all my writing in Obsidian": the tools the user works with."""
    m = re.match(
        r"^(?:i|we) (?:do|write|keep|track|manage|store|edit|code|plan|draw|design|take|organi[sz]e"
        r"|record|host|build|deploy|test|run|ship|back up|sync|draft|budget|journal)\b(?P<rest>.*?)"
        r" (?:in|with|on|using|via|through) (?P<tool>[\w.+-]+)",
        s.canon,
    )
    if not m or DEICTIC.match(m["tool"]):
        return None
    tool = re.search(rf"\b{re.escape(m['tool'])}", s.body, re.IGNORECASE)
    if tool is None or not re.search(r"[A-Z]", tool.group()):
        return None
    return Finding(Kind.FACT, 0.65, text_of(s), value=tool.group())


@_rule
def _scheduled_thing(s: Statement) -> Finding | None:
    """ "Work starts on June 3rd": something the user's plans hold, on a date."""
    m = re.match(
        r"^(?:the |our |my )?(?P<what>(?:[\w-]+ ){0,3}?[\w-]+) (?:starts|begins|kicks off|ends"
        r"|finishes"
        r"|is due|wraps up|launches|opens|closes|is scheduled|is planned|is booked|happens"
        r"|takes place)"
        r"\b(?P<rest>.*)$",
        s.canon,
    )
    if not m or not ABSOLUTE_DATE.search(m["rest"]) or len(s.canon.split()) > 16:
        return None
    if re.match(r"^(?:it|this|that|he|she|they|there|which|what|who|you)$", m["what"]):
        return None
    return Finding(Kind.DECISION, 0.6, text_of(s), value=value_after(s.body, m["rest"].strip()))


@_rule
def _dated_event(s: Statement) -> Finding | None:
    """ "We close on the house October 3rd": something the user will do on a date."""
    m = re.match(rf"^(?:i|we){ADV} (?P<verb>[a-z]+)\b(?P<rest>.*)$", s.canon)
    if not m or not ABSOLUTE_DATE.search(m["rest"]):
        return None
    verb = m["verb"]
    if (
        verb.endswith("ed")
        or verb in IRREGULAR_PAST
        or re.match(
            r"^(?:am|are|was|were|have|had|do|did|think|feel|need|want|know|guess|hope|wonder|get"
            r"|got"
            r"|went|saw|said|told|asked|forgot|remember|mean|meant|can|could|would|should|might|may"
            r"|must|will|shall|just|also|really|only|probably|maybe"
            # past and present spelt alike: "I set up two-factor authentication on April 5th"
            r"|set|put|cut|hit|let|quit|spread|shut|cost|read)$",
            verb,
        )
    ):
        return None
    return Finding(Kind.DECISION, 0.65, text_of(s), value=value_after(s.body, m["rest"].strip()))


@_rule
def _possessive(s: Statement) -> Finding | None:
    m = re.match(
        r"^(?P<poss>my|our) (?P<noun>(?:[\w'-]+ ){0,3}?[\w'-]+?) (?P<verb>is|are|was|were|has|have"
        r"|turns|turned|lives|works|gets|goes|plays|studies|runs|uses|starts|ends|moved|got"
        r"|does not"
        r"|do not|can not|never|always|usually|just|will be|had|\w+s)\b(?P<rest>.*)$",
        s.canon,
    )
    if not m:
        return None
    noun, verb, rest = m["noun"], m["verb"], m["rest"].strip()
    if MY_EXCLUDED.match(noun) or (not rest and verb in ("is", "are", "was", "were")):
        return None
    if TRANSIENT_STATES.match(rest) and not re.match(r"^(?:in|from|at|on)\s", rest):
        return None
    if re.match(
        r"^(?:broken|down|dead|slow|crashing|not working|acting up|stuck|missing|empty|full)\b",
        rest,
    ):
        return None
    if verb in ("is", "are", "was", "were") and EVALUATIVE.match(rest):
        return None
    shape = _slot_value(rest) if verb in ("is", "are") else ""
    if shape and shape not in ("WHEN",):
        shape = _shape(shape, s.body)
    head = re.sub(r"^(?:actual|real|current|new|old|former|true|correct) ", "", noun)
    slot = f"{m['poss']}:{head}:{verb}:{shape}"
    value = value_after(s.body, rest)
    if re.match(rf"^(?:{PLAN_NOUNS})$", noun) or SCHEDULED.match(f"{verb} {rest}"):
        return Finding(Kind.DECISION, 0.75, text_of(s), slot=slot, value=value)
    return Finding(Kind.FACT, 0.8, text_of(s), slot=slot, value=value)


@_rule
def _the_plan(s: Statement) -> Finding | None:
    m = re.match(
        r"^the (?P<noun>(?:[\w-]+ ){0,2}?(?:budget|deadline|launch|launch date|release|release date"
        r"|plan|meeting|client meeting|kickoff|wedding|party|trip|flight|move|date|appointment"
        r"|interview|venue|due date|goal|target|offsite|retreat|demo|presentation|go-live))"
        r" (?P<verb>is|are|was|has been|will be|got|moved|changed|shifted|was moved"
        r"|got moved)\b(?P<rest>.*)$",
        s.canon,
    )
    if not m or not m["rest"].strip():
        return None
    rest = m["rest"].strip()
    if not (
        TIMELY.search(s.canon)
        or re.search(r"[$€£]\s?\d|\d", s.canon)
        or re.search(r"[A-Z]", s.body[4:])
    ):
        return None
    slot = f"the:{m['noun']}"
    return Finding(Kind.DECISION, 0.7, text_of(s), slot=slot, value=value_after(s.body, rest))


@_rule
def _named_relation(s: Statement) -> Finding | None:
    m = re.match(r"^(?P<name>[\w'-]+(?: [\w'-]+)?) (?:is|are|was) (?:my|our) (?P<rel>.+)$", s.canon)
    if not m:
        return None
    name = value_after(s.body, m["name"]) or ""
    if not name[:1].isupper() or m["name"].split()[0] in NOT_NAMES:
        return None
    if MY_EXCLUDED.match(m["rel"]):
        return None
    return Finding(Kind.FACT, 0.75, text_of(s), slot=f"named:{m['name']}", value=m["rel"])


@_rule
def _embedded_first_person(s: Statement) -> Finding | None:
    """ "The conference I'm speaking at is in Austin": a first-person relative clause."""
    m = re.match(
        r"^the (?P<noun>[\w-]+(?: [\w-]+)?) (?:i|we) (?:am |are |was |were |will be )?\w+"
        r"(?: (?:at|in|for|with|on|to))? (?:is|are|was) (?P<rest>.+)$",
        s.canon,
    )
    if not m or TRANSIENT_STATES.match(m["rest"]):
        return None
    return Finding(
        Kind.FACT, 0.7, text_of(s), slot=f"the:{m['noun']}", value=value_after(s.body, m["rest"])
    )
