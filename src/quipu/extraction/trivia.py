"""Revision 4 of the deterministic rules (issue 24): true but trivial statements. Pure.

Judged by hand, 16.9 % of the facts extractor 1.4 promoted were faithful but trivial
(``tests/data/promotion_judged_facts_r4.json``): a plan for one meal or one evening, a
resolution taken in reply to the assistant's advice, a statement that only points back into
the conversation ("the sauce", "that day"), a request for help phrased as a fact, a duration
that does not say of what. :func:`trivial` names why such a candidate is not stored, or
returns None; :func:`trimmed` cuts a request tacked onto a fact ("I'm planning a trip to Tokyo
in June and was wondering what the weather is like" keeps the trip).

Each pattern here is quoted from the judged samples or the LongMemEval sessions they came
from; a pattern that would drop the evidence of a fact-type question was left out (``quipu
eval promotion`` reports that figure per question type).
"""

from __future__ import annotations

import re

from quipu.core.records import Kind
from quipu.extraction.segment import Span
from quipu.extraction.statement import Finding, canonical

__all__ = ["distorted", "question_tail", "role_lead", "trimmed", "trivial"]

#: "I have a kind of weird question", "I've got a few more questions about the pastry dough".
_REQUEST = re.compile(
    r"\bhave (?:got )?(?:a|an|some|a few|few|more|a couple(?: of)?)(?: [\w-]+){0,3}"
    r" (?:questions?|rules|requests?|favou?rs?|concerns?|tasks? that)\b"
    r"|\b(?:need|needs|could use|would like|would love) (?:some |a little |your |a bit of )?"
    r"(?:help|advice|suggestions|recommendations|ideas|tips|guidance)\b"
    r"|\bhave (?:got )?a (?:long way|lot) to go\b|\bmade a request\b"
)
#: "I'll definitely treat myself to something nice", "I've got a bunch from my aunt's
#: collection", "I've been using a mix of methods", "I have different interests".
_VAGUE = re.compile(
    r"\b(?:something|anything|somewhere)(?! (?:with|that|like|than|similar|from|by|about"
    r"|related|other)\b)(?: [\w-]+){0,3}$"
    r"|\b(?:a bunch(?! of)|a mix of (?:methods|things|approaches|strategies)"
    r"|different interests|other things|(?:visited|tried|bought|found|saw) one"
    r"|a few (?:events|things|trips|tasks)(?: \w+)? (?:lined up|coming up|to do)"
    r"|a brand that)\b"
)
#: "I've been practicing for about three months now": a duration, not what of.
_NO_OBJECT = re.compile(
    r"^i have been (?:practicing|practising|training|doing|using|learning|studying"
    r"|going|taking|working|following|attending|trying|making) (?:for|since|every|each"
    r"|(?:about|around) (?:\d|a |an |one |two |three |four |five |six |ten |half )"
    r"|consistently|regularly|daily|at least)"
)
#: "I'm planning to make chicken parmesan again this week": the menu of one week.
_MEAL_VERB = re.compile(
    r"\b(?:planning a|plan a|make|cook|bake|prepare|prep|try out|whip up|grill|roast|eat|have"
    r"|order|rinse)\b"
)
_FOOD = re.compile(
    r"\b(?:recipes?|dinner|lunch|breakfast|brunch|meals?|sauce|soup|salad|dish|snacks?|batch"
    r"|roll|rolls|tart|cake|cookies|pasta|pizza|parmesan|curry|stir-fry|burgers|sandwiches"
    r"|oatmeal|smoothies?|energy balls|kimchi|jars|chili|tacos|fajitas)\b"
)
_OCCASION = re.compile(
    r"\b(?:birthday|party|wedding|anniversary|potluck|bbq|barbecue|holiday|thanksgiving"
    r"|christmas|festival|competition|class|fundraiser|bake sale)\b"
)
#: "I'm planning to make the sauce", "head to the park a bit early": the conversation's thing.
_THE_THING = re.compile(
    r"\b(?:the|that|this) (?!(?:week|weekend|morning|afternoon|evening|night|day|summer|fall"
    r"|spring|winter|autumn|future|rest|end|next|first|last|same time|time|year|month|world"
    r"|moment|beginning|mornings|evenings|weekends|nights|afternoons|weekdays)\b)[a-z-]+\b"
)
#: "I'm definitely going to be more mindful of what I pack", "I'll keep my accessories
#: simple": a resolution taken in reply to the assistant's advice.
_RESOLUTION = re.compile(
    r"\b(?:definitely|certainly) (?:going to|gonna|will|plan to)\b|'ll definitely\b"
    r"|\b(?:going to|will) (?:be more|keep|work on|look into|do some research|make sure"
    r"|give (?:it|that|them|some)|have a listen|take some|use a combination|use (?:some|these"
    r"|those|the))\b"
)
#: "I spent the whole day at home catching up on emails", "I went to a regular grocery store
#: that day".
_DAY_LOCAL = re.compile(
    r"\b(?:that (?:day|night|morning|evening|afternoon)|the (?:whole|entire) (?:day|evening"
    r"|morning|afternoon|night|weekend))\b"
)
#: "my car is covered in a thick layer of yellow dust", "I'm on Season 4 Episode 5".
_STATE_NOW = re.compile(
    r"\b(?:is|are) (?:still |currently |now |all )?(?:covered in|a mess|messy|dirty|within"
    r"|full of|running low|low on|pretty diverse|yet to be)\b"
    r"|\b(?:am|is) on (?:season|episode|chapter|page|level|lesson|module|step|day|week|book)"
    r" \d"
    r"|\bthan usual\b"
)
#: "my favorite part was experimenting with different angles", "my frequent flyer status
#: helped", "The title I mention was the conference theme".
_REACTION = re.compile(
    r"\bfavou?rite (?:part|moment|bit|thing about (?:it|the \w+))\b"
    r"|\bhelped$|\bi (?:mention|mentioned|meant|asked about)\b|\bthe (?:\w+ )?i mention"
)
#: "I don't care about structure or efficiency": a reply to the assistant's framing.
_ANSWER_WISH = re.compile(r"^i do not (?:\w+ )?care about\b")
#: A plan, as opposed to a decision already taken ("I switched to decaf").
_PLAN = re.compile(r"\b(?:going to|planning to|planning on|plan to|will|intend to|about to)\b")
#: "I don't have any specific foot or ankle issues": the reply to the assistant's question.
_NOTHING_SPECIFIC = re.compile(
    r"^i (?:do not|did not) have (?:any (?:specific|particular|existing|other|special|real"
    r"|major|set|strict|preferred)|another)\b"
)
_TACKED_REQUEST = re.compile(
    r",? and (?:i )?(?:need|needs|am|was|were) (?:help|wondering|thinking|hoping|looking)\b.*$"
    r"|,? and (?:i )?(?:would like|would love to|wanted to ask|wants? to know|could use)\b.*$",
    re.IGNORECASE,
)
_NAME = re.compile(r"(?<!^)(?<![.!?] )\b(?!I\b|I')[A-Z][a-z][\w'-]*")


def trivial(body: str, finding: Finding) -> str | None:
    """Why ``finding`` (read from the cleaned clause ``body``) is true but not worth storing:
    ``request``, ``vague``, ``no_object``, ``meal_plan``, ``conversation_local`` or
    ``transient``; None when it is worth storing."""
    body = _TACKED_REQUEST.sub("", body)
    canon = canonical(body)
    named = bool(_NAME.search(body))
    if _REQUEST.search(canon):
        return "request"
    if _VAGUE.search(canon):
        return "vague"
    if _NO_OBJECT.search(canon):
        return "no_object"
    if (_DAY_LOCAL.search(canon) and not named) or _STATE_NOW.search(canon):
        return "transient"
    if _REACTION.search(canon) or _NOTHING_SPECIFIC.match(canon):
        return "conversation_local"
    if finding.kind is Kind.PREFERENCE and _ANSWER_WISH.match(canon):
        return "conversation_local"
    if finding.kind is Kind.DECISION:
        food = _MEAL_VERB.search(canon) and _FOOD.search(canon)
        if food and not _OCCASION.search(canon):
            return "meal_plan"
        planned = _PLAN.search(canon)
        if planned and not named and (_RESOLUTION.search(canon) or _THE_THING.search(canon)):
            return "conversation_local"
    return None


#: "User's df is called", "… spent two days in the stand, but unfortunately": cut short.
_CUT_END = re.compile(
    r"\b(?:called|named|titled|unfortunately|fortunately|luckily|sadly|however|although|so)$"
    r"|, (?:but|so|and) (?:as|when|if|since|because|while|once|unfortunately|luckily|sadly)\b"
    r"[^,]*$",
    re.IGNORECASE,
)
#: "User's neighbor plays been a huge relief", "User onces picked up": a verb bent wrongly.
_BENT_VERB = re.compile(
    r"\b(?!(?:has|was|is|does|always|sometimes|perhaps|its|this|us|his|hers|ours|yours"
    r"|theirs|times|years|months|weeks|days|hours|minutes|as|plus|less|unless)\b)\w+s been\b"
    r"|\b(?:onces|usuallys|meals prep|would \w+ly \w+s)\b|\b\w+n['’]ts\b"
)
#: A title with "my" in it rewritten ("My Brother, My Brother and Me" → "their Brother"), or
#: a title cut at an abbreviation ("Sgt", "A.I" → "A.they").
_QUOTED = re.compile(r"\"([^\"]*)(?:\"|$)")
_REWRITTEN_IN_QUOTE = re.compile(r"\b(?:User|they|their|them|theirs|themselves)\b")


#: "To preserve: propagate and perpetuate …", "To say: did a marathon", "To set … free: making
#: it accessible": a purpose clause read as a procedure. A procedure names a goal of two words
#: or more and steps that start with a verb in the imperative.
_PROCEDURE = re.compile(r"^To (?P<goal>[^:]+): (?P<first>\S+)", re.DOTALL)


def _not_a_procedure(text: str) -> bool:
    m = _PROCEDURE.match(text)
    if m is None:
        return False  # "first …, then …": the steps alone
    first = m["first"]
    steps = text[m.end() :]
    return (
        (len(m["goal"].split()) < 2 and not re.search(r",| then |; ", steps))
        or not first.isalpha()
        or first.endswith(("ing", "ed"))
        or first in ("did", "was", "were", "had", "said", "made", "got", "went", "they", "he")
        or bool(re.search(r"\b(?:they|he|she|it)\b", m["goal"], re.IGNORECASE))
    )


def distorted(text: str, kind: Kind | None = None) -> str | None:
    """Why the stored ``text`` would misquote the user (``fragment``), or None."""
    body = text.rstrip(" .!")
    if kind is Kind.PROCEDURE and _not_a_procedure(body):
        return "fragment"
    if _CUT_END.search(body) or _BENT_VERB.search(body) or re.search(r"\b(?:of|by) [A-Z]$", body):
        return "fragment"
    for m in _QUOTED.finditer(body.replace("“", '"').replace("”", '"')):
        inside = m.group(1)
        if _REWRITTEN_IN_QUOTE.search(inside):
            return "fragment"
        if not m.group(0).endswith('"') and (
            "." in inside or re.fullmatch(r"[A-Z][a-z]{0,3}", inside.strip())
        ):
            return "fragment"
    return None


def trimmed(text: str) -> str:
    """``text`` without a request tacked onto its end ("… and need help comparing prices")."""
    cut = _TACKED_REQUEST.sub("", text).rstrip(" ,")
    return cut if len(cut.split()) >= 4 else text


#: "The play I attended was actually a production of The Glass Menagerie, have you heard of
#: it?": one clause, a statement with a question tacked on.
_QUESTION_TAIL = re.compile(
    r"^(?P<said>.+?),\s*(?:have|has|do|did|does|can|could|would|will|is|are|was|any|what|how"
    r"|which|who|where|right|isn't|don't)\b[^,]*\??[\s\"')\]]*$",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|my|we|our)\b", re.IGNORECASE)


def question_tail(clause: Span) -> Span | None:
    """The statement before a question tacked onto the same clause, or None."""
    m = _QUESTION_TAIL.match(clause.text)
    if not m or not _FIRST_PERSON.search(m["said"]) or len(m["said"].split()) < 4:
        return None
    said = m["said"].rstrip()
    return Span(said, clause.start, clause.start + len(said))


#: "As an aspiring stand-up comedian, I'm looking for some advice": the request is not kept,
#: the role it states is.
_ROLE_LEAD = re.compile(
    r"^(?:As|Being) (?P<role>[Aa]n? (?!(?i:result|matter|reminder|side|follow|rule|whole|start"
    r"|first|quick|heads|way|bonus|treat|gift|favou?r|thank|courtesy|precaution|test|joke"
    r"|last|general|user|company|business|small business|brand|team|organi[sz]ation|leader"
    r"|chat|ai|language model|bot|model|assistant)\b)(?:[\w-]+ ){0,4}?[\w-]+?)"
    r"(?: myself| too| as well)?(?:,\s*(?:[Ii]|I'm|I am|I've)\b|$)"
)


def role_lead(body: str) -> Finding | None:
    """ "User is an aspiring stand-up comedian" from a request that opens with the role."""
    m = _ROLE_LEAD.match(body)
    if not m:
        return None
    role = m["role"]
    return Finding(Kind.FACT, 0.7, f"User is {role}", slot="role", value=role)
