"""Rules for instructions and procedures: what the user tells the assistant to always do,
and the steps of recurring tasks. Pure; tried after the rules of :mod:`.rules`."""

from __future__ import annotations

import re
from collections.abc import Callable

from quipu.core.records import Kind
from quipu.extraction.lexicon import DIRECTIVE_START, PERSISTENT, STYLE, TASK_OBJECT
from quipu.extraction.rewrite import third_person
from quipu.extraction.statement import Finding, Statement

__all__ = ["INSTRUCTION_RULES"]

Rule = Callable[[Statement], Finding | None]
INSTRUCTION_RULES: list[Rule] = []


def _instruction(fn: Rule) -> Rule:
    INSTRUCTION_RULES.append(fn)
    return fn


def _text(s: Statement) -> str:
    return third_person(s.body, we_as=s.we_as)


def _value_after(body: str, canon_value: str) -> str | None:
    index = body.lower().find(canon_value.strip())
    if index < 0:
        return canon_value.strip() or None
    return body[index : index + len(canon_value.strip())]


@_instruction
def _procedure(s: Statement) -> Finding | None:
    m = re.match(
        r"^(?:to|in order to) (?P<goal>.+?)(?:, | (?=(?:we|i|you) ))(?:(?:we|i|you) )?(?:need to "
        r"|have to"
        r" |must |should |always |just |first |usually |then )*(?P<steps>.+)$",
        s.canon,
    )
    if not m:
        m = re.match(r"^(?:first|step one|step 1)[,:]? (?P<steps>.+ then .+)$", s.canon)
        if not m:
            return None
        return Finding(Kind.PROCEDURE, 0.6, _text(s))
    steps = m["steps"]
    if not re.search(r",| then |; | and (?:then )?[a-z]+ ", steps):
        return None
    goal_index = s.body.lower().find(m["goal"])
    steps_index = s.body.lower().rfind(steps)
    if goal_index < 0 or steps_index < 0:
        return Finding(Kind.PROCEDURE, 0.6, _text(s))
    goal = s.body[goal_index : goal_index + len(m["goal"])]
    step_text = s.body[steps_index:]
    steps_text = third_person(step_text, we_as=s.we_as)
    return Finding(Kind.PROCEDURE, 0.7, f"To {goal}: {steps_text[:1].lower()}{steps_text[1:]}")


@_instruction
def _directive(s: Statement) -> Finding | None:
    """Standing instructions to the assistant: "always show times in CET", "don't use emojis"."""
    stop = re.match(r"^(?:please |pls |and |also |just )*stop (?P<rest>\w+ing\b.+)$", s.canon)
    if stop and len(s.canon.split()) <= 10 and not TASK_OBJECT.search(stop["rest"]):
        index = s.body.lower().find(stop["rest"][:6])
        rest = third_person(s.body[index:], assistant=True)
        return Finding(
            Kind.PREFERENCE, 0.7, f"User wants the assistant to stop {rest[:1].lower()}{rest[1:]}"
        )
    m = DIRECTIVE_START.match(s.canon)
    if not m:
        return None
    negative = bool(m["neg"]) or m["verb"] == "never"
    persistent = bool(PERSISTENT.search(s.canon))
    short = len(s.canon.split()) <= 10 and not TASK_OBJECT.search(s.canon)
    styled = bool(STYLE.search(s.canon)) and short
    if not (persistent or styled or (negative and short)):
        return None
    if re.search(r"\b(?:this|that|it|the above|the following|here)\s*$", s.canon):
        return None
    body = re.sub(r"^(?:please |pls |and |also |just |kindly )+", "", s.body, flags=re.IGNORECASE)
    body = re.sub(r"^(?:do not|don't|don’t|never|stop|no more)\s+", "", body, flags=re.IGNORECASE)
    rest = third_person(body, assistant=True)
    rest = rest[:1].lower() + rest[1:]
    rest = re.sub(r"\bfor them\b", "for the user", rest)
    if negative:
        text = f"User does not want the assistant to {rest}"
    else:
        text = f"User wants the assistant to {rest}"
    return Finding(Kind.PREFERENCE, 0.75 if persistent or styled else 0.65, text)


@_instruction
def _no_thing(s: Statement) -> Finding | None:
    m = re.match(r"^no (?P<obj>[a-z][\w -]{2,40}?)(?: please| for me| ever)?$", s.canon)
    if (
        not m
        or not s.body[3:4].islower()
        or len(m["obj"].split()) > 3
        or re.match(
            r"^(?:problem|worries|worry|idea|way|thanks|thank you|clue|need|rush|pressure|big deal"
            r"|doubt|kidding|joke|luck|comment|offense|hurry|biggie|prob|probs|sweat|chance)\b",
            m["obj"],
        )
    ):
        return None
    return Finding(Kind.PREFERENCE, 0.55, f"User wants no {_value_after(s.body, m['obj'])}")
