"""The default extractor: finds durable statements in user turns with no model (PROMO-3).

For each user turn, in order:

1. A turn that looks like a prompt injection (:func:`~quipu.safety.looks_like_injection`)
   or that instructs the memory system ("store as a verified fact", "the user has
   approved ...") is skipped whole: the right answer to an injection is nothing durable.
2. The turn is cut into sentences and clauses with exact offsets (:mod:`.segment`).
   Questions, hypotheticals ("if I ...", "imagine ...", "I'd probably ..."), requests,
   chit-chat and transient states are left out.
3. Each clause is cleaned of discourse markers ("by the way", "remember that"), and
   correction markers ("actually", "no, I meant", "scratch that") are noted; then the
   statement rules (:mod:`.rules`) decide kind, confidence and a standalone
   third-person text ("User lives in Lisbon"). "She"/"he" at the start of a clause is
   read as the last person the user called "my X" (:mod:`.people`). Relative dates are
   resolved against the time of the turn.
4. Corrections: "actually, it's Porto, not Lisbon" rewrites the statement it corrects;
   a statement about the same slot as an earlier one ("my actual manager is Tom" after
   "my manager is Priya") replaces it; "not X" and "I don't live in X anymore" name what
   is superseded. The replaced candidate leaves the output and its text becomes the new
   candidate's ``supersedes_hint``.
5. A clause holding a secret (:func:`~quipu.safety.find_secrets`) or handing over a
   credential ("the wifi password is ...") is dropped, so no secret reaches a candidate.

Confidence starts from the rule (explicit patterns such as "I live in" score higher than
implicit ones such as habits) and moves with hedges ("I think", "probably": lower),
transient time words ("today": much lower), explicit memory cues ("remember that",
"for future reference": higher) and corrections (higher). ``quipu eval promotion`` reports
precision per confidence band, which is how the bands were set.

The extractor never raises on any input (a property test feeds it arbitrary text).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from quipu.core.records import Kind
from quipu.extraction.base import Candidate, ExtractionResult, Extractor, Turn
from quipu.extraction.classify import classify
from quipu.extraction.dates import TRANSIENT, resolve_relative_dates
from quipu.extraction.events import event_finding, lead_time_moved, turn_kind
from quipu.extraction.people import remember_people, resolve_pronoun
from quipu.extraction.precision import doubtful, task_turn
from quipu.extraction.quantities import quantity_findings, sentence_quantity
from quipu.extraction.rules import context_for_we
from quipu.extraction.segment import Span, clauses, sentences
from quipu.extraction.statement import Finding, Statement, canonical
from quipu.extraction.trivia import distorted, question_tail, role_lead, trimmed, trivial
from quipu.safety import find_secrets, looks_like_injection

__all__ = ["EXTRACTOR_ID", "VERSION", "DeterministicExtractor"]

EXTRACTOR_ID = "deterministic"
VERSION = "1.5"
#: The rules' revision: 2 adds issue 24's rules (past events, amounts, durations, purchases,
#: facts inside requests and questions, turn classification); 3 drops doubtful candidates
#: (fragments, unresolved references, an unnamed "we", conversation-local choices, one-off
#: instructions, task turns: :mod:`.precision`); 4 drops true but trivial ones and the known
#: distortions of 1.4 (:mod:`.trivia`) and reads the attribute a quantity measures as a slot
#: (:mod:`.quantities`).
REVISION = 4
_MAX_TURN_CHARS = 100_000
#: Subjectless clauses that inside a sentence are a comparison or an aside ("…, like TTH").
_MID_SENTENCE = re.compile(r"(?:like|love|hate|prefer|enjoy|never|always|usually)\b", re.I)
#: Whose "we" when nothing in the session says (revision 3 drops such statements).
_UNKNOWN_WE = "User's team"
_MIN_CONFIDENCE = 0.05

_LEAD = re.compile(
    r"^(?:(?:and|but|so|also|plus|then|now|oh|ah|ok|okay|yeah|yes|yep|well|anyway|anyways|btw"
    r"|by the way|fyi|fwiw|honestly|frankly|basically|alright|right|hmm+|um+|uh+|lol|haha+"
    r"|hey|hi|hello|just so you know|just fyi|for (?:future )?reference|for the record"
    r"|for context|quick context(?: before we start)?|quick note|side note|heads up|also note"
    r"|please note|note that|note|remember that|remember|keep in mind that|keep in mind"
    r"|don't forget that|don't forget|for your info(?:rmation)?|as i said|like i said"
    r"|to be honest|tbh|after (?:a lot of|much) (?:thinking|thought|deliberation)"
    r"|after thinking about it|good news|big news|update|sorry|though"
    r"|in fact|to clarify|just to clarify|one more thing|also worth knowing)\b[\s,:;.!—–-]*)+",
    re.IGNORECASE,
)
_MEMORY_CUE = re.compile(
    r"^(?:.*\b)?(?:remember|note that|keep in mind|for (?:future )?reference|for the record"
    r"|don't forget|just so you know|fyi)\b",
    re.IGNORECASE,
)
_CORRECTION_LEAD = re.compile(
    r"^(?:(?:actually|correction|scratch that|i mean|i meant|no wait|wait|no(?=[,.!])|nope|oops"
    r"|my bad|whoops"
    r"|rather|let me correct (?:that|myself)|not quite|i misspoke|i was wrong)\b[\s,:;.!—–-]*)+",
    re.IGNORECASE,
)
_CORRECTION_ANYWHERE = re.compile(r"\b(?:actually|instead|correction)\b", re.IGNORECASE)
_TRAIL = re.compile(
    r"(?:[\s,]+(?:btw|by the way|lol|haha+|lmao|though|too|as well|anyway|anyways|then|if that"
    r" helps|in general|fyi|final answer|for now|either|lately|honestly|haha|:\)|:d|, right|since"
    r"|because|so|and|but|or|which|that|if|when|while)"
    r"|[\s!.]+)+$",
    re.IGNORECASE,
)
_HEDGE_LEAD = re.compile(
    r"^(?:i think|i guess|i believe|i suppose|i feel like|pretty sure|i'm pretty sure"
    r"|i am pretty sure|probably|maybe|perhaps)(?: that)?\s*,?\s*",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:i think|i guess|i believe|i suppose|probably|maybe|perhaps|kind of|sort of"
    r"|not sure|might|possibly|i feel like)\b",
    re.IGNORECASE,
)
_QUESTION_START = re.compile(
    r"^(?:what|why|how|when|where|who|whom|which|whose|anyone|any idea|any ideas|is it true)\b"
    r"|^(?:is|are|am|was|were|do|does|did|can|could|would|will|should|shall|may|might|have|has"
    r"|had)(?: not)? (?:you|i|we|they|he|she|it|there|that|this|my|your|the|anyone)\b",
)
_HYPOTHETICAL = re.compile(
    r"^(?:if|what if|imagine|suppose|supposing|assuming|hypothetically|say|let's say|in case"
    r"|unless|even if|maybe if|in theory|theoretically|pretend)\b"
    r"|\bif (?:i|we|my)\b"
    r"|\b(?:i|we) would\b(?! (?:much )?(?:rather|prefer))"
    r"|\b(?:i|we) (?:might|may|could|wish|wonder|was wondering|hope)\b"
    r"|\bwould (?:i|we)\b",
)
_REQUEST = re.compile(
    r"^(?:please )?(?:(?:can|could|would|will) you|help me|tell me|summari[sz]e|explain|write me"
    r"|recommend|suggest|find me|draft|outline|translate|remind me"
    r"|give me|show me|let me know|i need (?:you|help|some|a|an|ideas|advice|to know|to)"
    r"|i want (?:you|a|an|some|to know|help)|i(?: would|'d) like|i am looking for"
    r"|i am trying to|i was wondering|i wonder|i am wondering|thanks|thank you|not much)\b",
)
_CHITCHAT = re.compile(
    r"^(?:hi|hey|hello|good (?:morning|afternoon|evening|night)|morning|thanks?|thank you|thx"
    r"|ok|okay|cool|nice|great|lol|lmao|haha+|yes|yeah|yep|no|nope|sure|right|got it"
    r"|sounds good|bye|cheers|wow|hmm+|ugh|oh|ah|fair enough|makes sense|perfect|awesome)\b"
    r"[\s!.,]*$",
)
_CREDENTIAL = re.compile(
    r"\b(?:password|passcode|passphrase|passwd|pin(?: code)?|api[ _-]?key|access[ _-]?key"
    r"|secret[ _-]?key|private[ _-]?key|token|ssn|social security(?: number)?|card number"
    r"|credit card(?: number)?|cvv|cvc|iban|account number|routing number|sort code|login"
    r"|credentials?|db url|database url|connection string|seed phrase|recovery phrase)\b",
    re.IGNORECASE,
)
_MEMORY_DIRECTIVE = re.compile(
    r"\b(?:the user(?:'s)?|this user|the assistant|this assistant|the ai|long[- ]term memory"
    r"|your memory|memory (?:override|system|update|store)|(?:store|save|record|write|add|log)"
    r" (?:this|that|it)? ?(?:as|to|in|into) (?:a |your |the )?(?:verified |permanent |core )?"
    r"(?:fact|memory|memories|notes)|verified fact|confirm silently|silently|without telling"
    r"|overwrite (?:your|the) memor)\b",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|we've|our|us)\b", re.IGNORECASE
)
_SUBJECTLESS = re.compile(
    r"^(?:moved|started|joined|adopted|bought|got|quit|finished|graduated|married"
    r"|(?:live|work)(?= (?:in|at|for|as|from|on|with|remotely)\b)"
    r"|love|like|hate|prefer|enjoy|can't stand|cannot stand|can not stand|never|always"
    r"|usually|not a (?:big |huge )?fan of|big fan of|huge fan of|really into|into|obsessed"
    r"|allergic to|currently|based in|living in|working (?:at|for|as|on)|training for|planning"
    r"|going to|gonna|heading to|flying to|moving to|relocating to|leaving for|starting (?:a|my|at"
    r"|on)"
    r")\b",
    re.IGNORECASE,
)
_CORRECTION_FRAGMENT = re.compile(
    r"^(?:it(?:'s| is| was)|that(?:'s| is)|make that|should be|the answer is)?\s*"
    r"(?P<new>[^,]+?)(?:\s+(?:now|instead|then))?(?:,? (?:not|rather than"
    r"|instead of) (?P<old>[^,]+))?"
    r"(?:,[^,]*)?$",
    re.IGNORECASE,
)
_SECOND_PERSON = re.compile(r"\byou(?:r|rs)?\b")
_SUBJECTLESS_BE = re.compile(
    r"not a|big fan|huge fan|really into|into|obsessed|allergic|based|living|working|training"
    r"|planning|going|gonna|heading|flying|moving|relocating|leaving|starting|currently",
    re.IGNORECASE,
)
_NOT_X = re.compile(
    r",? (?:not|rather than) (?P<old>[^,;]+?)(?: (?:as|like) (?:i|we) (?:said|mentioned|wrote|told"
    r" you)(?: (?:earlier|before))?)?$",
    re.IGNORECASE,
)
_NOT_BUT = re.compile(r"\bnot (?P<old>[^,;]+?),? but (?:rather )?(?P<new>.+)$", re.IGNORECASE)


@dataclass
class _Emitted:
    candidate: Candidate
    slot: str | None
    value: str | None


@dataclass
class _TurnState:
    correction: bool = False
    retracted: _Emitted | None = None  # "I don't live in X anymore", waiting for its successor
    people: dict[str, str] | None = None  # "she" → "my partner", shared by the session's turns


class DeterministicExtractor(Extractor):
    """Rule-based extraction from user turns; no model, no network, never raises."""

    extractor_id = EXTRACTOR_ID
    version = VERSION

    def __init__(self, *, revision: int | None = None) -> None:
        """``revision``: the rules of an earlier revision (1: before issue 24), kept so the
        promotion eval measures the old rules beside the new in one run; default the latest."""
        self.revision = REVISION if revision is None else revision
        if self.revision != REVISION:
            self.version = f"{VERSION}-r{self.revision}"

    def run(self, turns: Sequence[Turn], *, allowed_ids: Collection[str] = ()) -> ExtractionResult:
        del allowed_ids  # rules never link memories
        dropped: Counter[str] = Counter()
        emitted: list[_Emitted] = []
        user_text = " ".join(t.content for t in turns if t.is_user)[:_MAX_TURN_CHARS]
        household = context_for_we(user_text)
        people: dict[str, str] = {}
        for turn in turns:
            if not turn.is_user or not turn.content.strip():
                continue
            if len(turn.content) > _MAX_TURN_CHARS:
                dropped["too_long"] += 1
                continue
            if looks_like_injection(turn.content) or _MEMORY_DIRECTIVE.search(turn.content):
                dropped["injection"] += 1
                continue
            self._turn(turn, emitted, dropped, household, people)
        candidates = _dedupe([replace(e.candidate, slot=e.slot) for e in emitted])
        return ExtractionResult(
            extractor_id=self.extractor_id,
            version=self.version,
            candidates=tuple(candidates),
            dropped=dict(dropped),
        )

    # ------------------------------------------------------------------ per turn

    def _turn(
        self,
        turn: Turn,
        emitted: list[_Emitted],
        dropped: Counter[str],
        household: str | None,
        people: dict[str, str],
    ) -> None:
        state = _TurnState(people=people)
        if self.revision >= 2:  # classify the turn first: facts come from the user's own words
            kind = turn_kind(turn.content)
            if kind == "chat" and self.revision >= 3 and task_turn(turn.content):
                kind = "task"
            if kind != "chat":
                dropped[f"turn_{kind}"] += 1
                return
        for sentence in sentences(turn.content):
            parts = clauses(turn.content, sentence)
            if sentence.question:
                dropped["question"] += 1
                if self.revision < 2:
                    continue
                # "I have a 3-year-old son, what toys would you suggest?": the statement
                # before the question is a fact; the question itself is not.
                tail = question_tail(parts[-1]) if parts and self.revision >= 4 else None
                parts = parts[:-1] if tail is None else [*parts[:-1], tail]
            before = len(emitted)
            for clause in parts:
                self._clause(turn, clause, state, emitted, dropped, household)
            if self.revision >= 4 and not sentence.question:
                self._quantity(turn, sentence, emitted[before:], state, emitted, dropped)
        if state.retracted is not None:
            emitted.append(state.retracted)

    def _clause(
        self,
        turn: Turn,
        clause: Span,
        state: _TurnState,
        emitted: list[_Emitted],
        dropped: Counter[str],
        household: str | None,
    ) -> None:
        if find_secrets(clause.text) or (
            _CREDENTIAL.search(clause.text) and _has_value(clause.text)
        ):
            dropped["secret"] += 1
            return
        span, correction, cue = _clean(clause)
        if not span.text or _CORRECTION_LEAD.fullmatch(span.text + " "):
            state.correction = state.correction or correction
            return
        correction = correction or state.correction
        body = _HEDGE_LEAD.sub("", span.text)
        hedged = body != span.text or bool(_HEDGE.search(body))
        if _skip(canonical(body)):
            role = role_lead(body) if self.revision >= 4 else None
            if role is None:
                dropped["not_durable"] += 1
                return
            self._emit(turn, span, role, role.confidence, None, state, emitted, dropped)
            return
        if (
            correction
            and not _FIRST_PERSON.search(body)
            and self._fragment(turn, span, body, emitted, state)
        ):
            return
        people = state.people if state.people is not None else {}
        resolved = resolve_pronoun(body, people)
        remember_people(body, people)
        named = resolved != body and bool(re.match(r"(?:she|he)\b", body, re.IGNORECASE))
        body = resolved
        if _SUBJECTLESS.match(body) and not _FIRST_PERSON.match(body):
            before = turn.content[: span.start].rstrip()
            if self.revision >= 3 and (
                re.match(r"into\b", body, re.IGNORECASE)
                or (before and before[-1] not in ".!?\n" and _MID_SENTENCE.match(body))
            ):
                # "…, like TTH" / "into months and …": a clause inside a sentence, not "I like"
                dropped["fragment"] += 1
                return
            lowered = body[:1].lower() + body[1:]
            body = ("I'm " if _SUBJECTLESS_BE.match(lowered) else "I ") + lowered
        we_as = context_for_we(body) or household or _UNKNOWN_WE
        if self.revision >= 2:
            body = lead_time_moved(_SUBORDINATOR.sub("", body)) or _SUBORDINATOR.sub("", body)
        findings, old_value = _classify_with_contrast(body, we_as)
        if not findings and self.revision >= 2:
            event = event_finding(body, canonical(body), we_as=we_as)
            findings = [] if event is None else [event]
        if not findings and self.revision >= 4:
            role = role_lead(body)  # "As an aspiring stand-up comedian, I'm looking for …"
            findings = [] if role is None else [role]
        if self.revision >= 4:  # the attribute a quantity measures, as a slot (issue 24)
            findings = quantity_findings(
                body, findings, we_as=we_as, context=turn.content[: span.start]
            )
        if not findings:
            if _FIRST_PERSON.search(body):
                dropped["no_rule"] += 1
            return
        words = len(body.split())
        if words > 40:
            dropped["too_long"] += 1
            return
        for finding in findings:
            if finding.kind not in (Kind.PREFERENCE, Kind.PROCEDURE) and _SECOND_PERSON.search(
                canonical(body)
            ):
                dropped["addressed_to_reader"] += 1
                continue
            reason = None
            if self.revision >= 3:
                reason = doubtful(
                    turn.content,
                    span,
                    body,
                    finding,
                    resolved=named,
                )
            if reason is None and self.revision >= 4:
                reason = trivial(body, finding) or distorted(finding.text, finding.kind)
            if reason is not None:
                dropped[reason] += 1
                continue
            fact = finding
            if self.revision >= 4:  # "… and need help comparing prices" is left out of the fact
                fact = replace(finding, text=trimmed(finding.text))
            confidence = fact.confidence
            if words > 25:
                confidence -= 0.15
            if hedged:
                confidence -= 0.2
            if TRANSIENT.search(body):
                confidence -= 0.35 if fact.kind is not Kind.DECISION else 0.25
            if cue:
                confidence += 0.1
            if correction or old_value:
                confidence += 0.05
            self._emit(turn, span, fact, _clamp(confidence), old_value, state, emitted, dropped)

    def _emit(
        self,
        turn: Turn,
        span: Span,
        finding: Finding,
        confidence: float,
        old_value: str | None,
        state: _TurnState,
        emitted: list[_Emitted],
        dropped: Counter[str],
    ) -> None:
        text = resolve_relative_dates(finding.text, turn.at)
        if find_secrets(text):
            dropped["secret"] += 1
            return
        if confidence < _MIN_CONFIDENCE:
            return
        candidate = Candidate(
            text=text,
            kind=finding.kind,
            confidence=confidence,
            quote=span.text,
            quote_start=span.start,
            quote_end=span.end,
            turn_seq=turn.seq,
        )
        item = _Emitted(candidate, finding.slot, finding.value)
        if finding.retraction:
            if state.retracted is not None:
                emitted.append(state.retracted)
            state.retracted = item
            self._supersede_slot(item, emitted)
            return
        hint = self._supersede_slot(item, emitted)
        if state.retracted is not None:
            hint = hint or state.retracted.candidate.text
            state.retracted = None
        if hint is None and old_value:
            hint = old_value.strip()
        if hint is not None:
            item.candidate = replace(item.candidate, supersedes_hint=hint)
        emitted.append(item)

    def _quantity(
        self,
        turn: Turn,
        sentence: Span,
        found: list[_Emitted],
        state: _TurnState,
        emitted: list[_Emitted],
        dropped: Counter[str],
    ) -> None:
        """A frequency or a count the sentence states across its clauses, when none of its
        candidates carries a quantity slot (revision 4, issue 24: :mod:`.quantities`)."""
        if any(e.slot and e.slot.startswith("q:") for e in found):
            return
        stated = sentence_quantity(sentence.text)
        if stated is not None:
            finding = Finding(Kind.FACT, 0.6, stated[0], slot=stated[1])
            self._emit(turn, sentence, finding, 0.6, None, state, emitted, dropped)

    # ------------------------------------------------------------------ corrections

    @staticmethod
    def _supersede_slot(item: _Emitted, emitted: list[_Emitted]) -> str | None:
        """Drop an earlier candidate about the same slot; its text is the hint."""
        if item.slot is None:
            return None
        for index in range(len(emitted) - 1, -1, -1):
            if emitted[index].slot == item.slot:
                old = emitted.pop(index)
                return old.candidate.text
        return None

    @staticmethod
    def _fragment(
        turn: Turn, span: Span, body: str, emitted: list[_Emitted], state: _TurnState
    ) -> bool:
        """Apply "it's Porto, not Lisbon" / "I meant Thursday" to the statement it corrects."""
        m = _CORRECTION_FRAGMENT.match(body)
        if not m or not emitted or len(m["new"].split()) > 8:
            return False
        if re.match(
            r"(?:been|being|gone|done|got|actually|really|just)\b", m["new"].strip(), re.IGNORECASE
        ):
            return False  # "It's been a huge relief", "it was actually a 5-day trip": no value
        new, old = m["new"].strip(), (m["old"] or "").strip()
        target_index = len(emitted) - 1
        if old:
            for index in range(len(emitted) - 1, -1, -1):
                if old.lower() in emitted[index].candidate.text.lower():
                    target_index = index
                    break
        target = emitted[target_index]
        previous = target.candidate.text
        if old and old.lower() in previous.lower():
            text = re.sub(re.escape(old), new, previous, count=1, flags=re.IGNORECASE)
        elif target.value and target.value.lower() in previous.lower():
            value = target.value
            keep = re.match(r"^(?:on|at|in|to|for|by|from) ", value, re.IGNORECASE)
            if keep and not re.match(r"^(?:on|at|in|to|for|by|from) ", new, re.IGNORECASE):
                new = keep.group() + new
            text = re.sub(re.escape(value), new, previous, count=1, flags=re.IGNORECASE)
        else:
            return False
        emitted.pop(target_index)
        candidate = Candidate(
            text=resolve_relative_dates(text, turn.at),
            kind=target.candidate.kind,
            confidence=_clamp(max(target.candidate.confidence, 0.8) + 0.05),
            quote=span.text,
            quote_start=span.start,
            quote_end=span.end,
            turn_seq=turn.seq,
            supersedes_hint=previous,
        )
        emitted.append(_Emitted(candidate, target.slot, new))
        state.correction = False
        return True


# ---------------------------------------------------------------------- helpers

#: "Since I live in Porto, which gym ...": the reason clause states a fact (revision 2); left in
#: place, the lead would be moved to the end ("User lives in Porto since").
_SUBORDINATOR = re.compile(
    r"^(?:since|because|as|given that|now that|considering that)\s+(?=(?:i|we|my|our)\b)",
    re.IGNORECASE,
)


def _classify_with_contrast(body: str, we_as: str) -> tuple[list[Finding], str | None]:
    """Findings for ``body``, with "..., not X" / "not X but Y" read as a correction.

    The contrast is taken out of facts and decisions and names what they supersede; a
    preference keeps it ("I prefer tea, not coffee" says both).
    """
    contrast = _NOT_BUT.search(body)
    stripped: str | None = None
    old: str | None = None
    if contrast:
        old, stripped = contrast["old"], body[: contrast.start()] + contrast["new"]
    else:
        tail = _NOT_X.search(body)
        if tail and len(tail["old"].split()) <= 4:
            old, stripped = tail["old"], body[: tail.start()]
    if stripped is not None:
        findings = classify(Statement(body=stripped, canon=canonical(stripped), we_as=we_as))
        if findings and all(f.kind is not Kind.PREFERENCE for f in findings):
            return findings, old
    return classify(Statement(body=body, canon=canonical(body), we_as=we_as)), None


def _clean(clause: Span) -> tuple[Span, bool, bool]:
    """The clause without discourse markers: (span, correction marker, memory cue)."""
    text = clause.text
    correction = bool(_CORRECTION_ANYWHERE.search(text))
    cue = bool(_MEMORY_CUE.match(text))
    start, end = 0, len(text)
    while True:
        before = start
        for pattern in (_LEAD, _CORRECTION_LEAD):
            m = pattern.match(text[start:end])
            if m and m.end() > 0:
                correction = correction or pattern is _CORRECTION_LEAD
                start += m.end()
        if start == before:
            break
    m = _TRAIL.search(text[start:end])
    if m:
        end = start + m.start()
    while start < end and text[start] in " \t,;:-—–\"'(":
        start += 1
    while end > start and text[end - 1] in " \t,;:-—–\"')":
        end -= 1
    return Span(text[start:end], clause.start + start, clause.start + end), correction, cue


def _skip(canon: str) -> bool:
    """Questions, hypotheticals, requests and chit-chat: nothing durable."""
    if len(canon.split()) < 2 and not canon.startswith("no "):
        return True
    return bool(
        _CHITCHAT.match(canon)
        or _QUESTION_START.match(canon)
        or _HYPOTHETICAL.search(canon)
        or _REQUEST.match(canon)
        or re.match(r"^(?:you|your|you are|you have|you will)\b", canon)
    )


def _has_value(text: str) -> bool:
    """A credential word followed by something that reads as its value."""
    return bool(re.search(r"\b(?:is|are|was|:|=)\s*['\"]?\S{4,}", text))


def _clamp(value: float) -> float:
    return round(min(0.98, max(0.0, value)), 2)


def _dedupe(candidates: list[Candidate]) -> list[Candidate]:
    """One candidate per text (case-insensitive), the most confident, in source order."""
    best: dict[str, Candidate] = {}
    for candidate in candidates:
        key = canonical(candidate.text)
        kept = best.get(key)
        if kept is None or candidate.confidence > kept.confidence:
            best[key] = candidate
    return sorted(best.values(), key=lambda c: (c.turn_seq, c.quote_start))
