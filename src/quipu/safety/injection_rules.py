"""Injection phrasings and the folded copies of a text they are matched on (SAFE-2).

Phrases run on a *probe*: the text NFKC-normalised, zero-width characters dropped,
look-alike letters (Cyrillic, Greek) and accented Latin letters mapped to plain ASCII, one
character to one character, so a span in the probe is a span in the text. Beside the probe,
detection also tries: leetspeak inside mixed tokens (``1gn0r3``), letters spelled out with
spaces or dots (``i g n o r e``, ``i.g.n.o.r.e``), and base64, hex, URL and HTML encodings
of a whole instruction. Each phrase group only runs when one of its trigger words occurs.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from quipu.safety.normalize import LOOKALIKES

__all__ = ["PHRASES", "Phrase", "ascii_letters", "leet", "probe", "spaced_runs", "squashed_hit"]

_W = r"[\s\-_]{1,40}+"  # a gap between words; underscores and hyphens count as spaces
_OPT_W = r"[\s\-_]*+"
_WORD = r"[^\W_]++"
_ANY_WORDS = rf"(?:{_W}{_WORD}){{0,3}}?"


def _accent_table() -> dict[int, str]:
    """Accented Latin letters to their base letter, one to one (``é`` -> ``e``)."""
    table: dict[int, str] = {}
    for code in range(0xC0, 0x250):
        base = unicodedata.normalize("NFD", chr(code))[0]
        if base.isascii() and base.isalpha():
            table[code] = base
    return table


_PROBE_TABLE: dict[int, str | int | None] = {**LOOKALIKES, **_accent_table()}


def ascii_letters(clean: str) -> str:
    """A same-length copy of cleaned (NFKC, invisible-free) text with look-alike and accented
    letters in plain ASCII, case kept (base64 needs it)."""
    return clean.translate(_PROBE_TABLE)


def probe(clean: str) -> str:
    """:func:`ascii_letters`, lower-cased, still the same length as ``clean``."""
    cased = clean.translate(_PROBE_TABLE)
    folded = cased.lower()
    if len(folded) == len(cased):
        return folded
    # a few letters lower-case into two characters; keep those as they are
    return "".join(low if len(low := c.lower()) == 1 else c for c in cased)


_LEET = str.maketrans("0134578@$|", "oieastbasi")
# Starts only at a token start and scans it once, so a long token costs its length.
_MIXED_TOKEN = re.compile(
    r"(?<![A-Za-z0-9@$|])[A-Za-z0-9@$|]*?(?:[A-Za-z][0-9@$|]|[0-9@$|][A-Za-z])[A-Za-z0-9@$|]*+"
)


_MIXED_PAIR = re.compile(r"[a-z][0-9@$|][a-z0-9@$|]|[0-9@$|][a-z]")


def leet(text: str) -> str:
    """Digits and symbols read as letters inside tokens that mix them (``1gn0r3``);
    ``text`` is lower-case."""
    if _MIXED_PAIR.search(text) is None:
        return text
    return _MIXED_TOKEN.sub(lambda m: m[0].translate(_LEET), text)


# Letters spelled out one by one: "i g n o r e", "I.G.N.O.R.E", "i-g-n-o-r-e"
# A match always succeeds once it has four letters, so each run is scanned once.
_SPACED = re.compile(r"(?<![A-Za-z])[A-Za-z](?:[ \t.\-_*|/,·•]{1,3}+[A-Za-z]){3,}+")


def spaced_runs(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, letters)`` of each spelled-out run."""
    runs: list[tuple[int, int, str]] = []
    for match in _SPACED.finditer(text):
        body = match[0]
        at = [i for i, c in enumerate(body) if c.isalpha()]
        if match.end() < len(text) and text[match.end()].isalpha():
            at.pop()  # the last letter starts an ordinary word
        if len(at) >= 4:
            letters = "".join(body[i] for i in at).lower()
            runs.append((match.start(), match.start() + at[-1] + 1, letters))
    return runs


_SQUASHED = re.compile(
    r"(?:ignore|disregard|forget|override|bypass)(?:all|any|every|the|your|my|of)*"
    r"(?:previous|prior|above|earlier|preceding|former|original|initial|system)"
    r"|(?:ignore|disregard|forget)(?:all|your|the)*(?:instructions|rules|guidelines|prompt)"
    r"|systemprompt|youarenow|fromnowonyou|newinstructions|jailbreak|developermode"
    r"|doanythingnow|pretendtobe|actasan?(?:unrestricted|unfiltered|uncensored|evil)"
    r"|revealyour|donottelltheuser|donttelltheuser|yournewtask|exfiltrate"
)


def squashed_hit(letters: str) -> bool:
    return _SQUASHED.search(letters) is not None


_LINE_LEAD = re.compile(r"[ \t\[(<#*{|]*+\Z")


@dataclass(frozen=True)
class Phrase:
    """A phrasing and the words (lower-case, in the probe) one of which it holds.

    ``at_line``: the phrasing only counts at the start of a line or sentence (role labels
    such as "SYSTEM:"); patterns start with their words, so the regex engine can skip to
    them, and the position is checked here.
    """

    triggers: tuple[str, ...]
    pattern: re.Pattern[str]
    at_line: bool = False
    also: tuple[str, ...] = ()

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        position = 0
        while (match := self.pattern.search(text, position)) is not None:
            start = match.start()
            # a refused match may hide one that starts inside it: search on from start + 1
            position = start + 1
            if start and text[start].isalnum() and text[start - 1].isalnum():
                continue  # inside a word
            if self.at_line:
                lead = _LINE_LEAD.search(text, max(0, start - 12), start)
                before = lead.start() if lead else start
                if before and text[before - 1] not in "\n\r.!?;:":
                    continue
            position = max(match.end(), start + 1)
            yield match.span()


def _phrase(triggers: str, pattern: str, *, at_line: bool = False, also: str = "") -> Phrase:
    """Patterns are written in lower case and run on lower-cased text: without IGNORECASE
    the regex engine can skip ahead to a pattern's first letters."""
    return Phrase(tuple(triggers.split()), re.compile(pattern), at_line, tuple(also.split()))


_OVERRIDE = (
    r"(?:ignore|disregard|forget|override|bypass|skip|drop|discard|abandon|dismiss|neglect"
    rf"|set{_W}aside|throw{_W}out|pay{_W}no{_W}(?:attention|heed){_W}to|stop{_W}following"
    rf"|(?:do{_W}not|don'?t|no{_W}longer){_W}(?:follow|obey|heed))"
)
_PRIOR = (
    r"(?:previous|prior|above|earlier|preceding|former|original|initial|system|old|existing"
    r"|given|foregoing|aforementioned|safety|default|developer'?s?)"
)
_RULES = (
    r"(?:instructions?|prompts?|rules|directions|directives|guidelines|messages|context"
    r"|commands|orders|programming|training|constraints|restrictions|guardrails|policies"
    r"|filters|safeguards|system{_W}prompt)"
).replace("{_W}", _W)
_AI = r"(?:ai|a\.i\.|assistant|llm|language{_W}model|model|agent|chatbot|bot|gpt|claude)".replace(
    "{_W}", _W
)
_UNBOUND = (
    r"(?:unrestricted|unfiltered|uncensored|unlimited|unbound|unshackled|unchained|jailbroken"
    r"|unaligned|amoral|unethical|evil|rogue|malicious|lawless|rule-?less|dan|do{_W}anything"
    r"{_W}now|developer{_W}mode|god{_W}mode|no{_W}(?:limits|restrictions|rules|filters))"
).replace("{_W}", _W)
#: What turns role-play into a jailbreak: the words "from now on, you ..." or "pretend ..."
#: must be followed closely by one of these to count.
_JAILBREAK = (
    r"no|not|never|without|unrestricted|unfiltered|uncensored|unlimited|unbound|jailbroken"
    r"|dan|evil|amoral|unethical|ignore|disregard|bypass|override|forget|free|freed"
    r"|restrictions|limits|filters|rules|guidelines|policy|policies|censorship"
)
_JAILBREAK_WORDS = _JAILBREAK.replace("|", " ")
_SECRET_OBJECTS = (
    r"(?:conversations?|chats?|chat{_W}(?:logs?|history)|conversation{_W}history|memories"
    r"|memory(?:{_W}store)?|transcripts?|credentials|passwords|secrets|api{_W}keys|tokens"
    r"|system{_W}prompt|(?:user|personal|private){_W}(?:data|information|info|details))"
).replace("{_W}", _W)
_DESTROY = r"(?:forget|delete|remove|drop|purge|wipe|erase|clear|destroy|revoke|truncate|reset)"

PHRASES: tuple[Phrase, ...] = (
    # ignore / disregard / forget previous instructions
    _phrase(
        "ignore disregard forget override bypass skip drop discard abandon dismiss neglect "
        "aside throw attention heed follow following obey stop longer",
        rf"{_OVERRIDE}(?:{_W}(?:all|any|every|of|the|your|my|these|those|everything|anything"
        rf"|its|their)){{0,3}}{_W}{_PRIOR}(?:{_W}{_WORD}){{0,2}}?{_W}{_RULES}\b",
    ),
    _phrase(
        "ignore disregard forget override bypass skip drop discard abandon dismiss neglect "
        "aside throw attention heed follow following obey stop longer",
        rf"{_OVERRIDE}(?:{_W}(?:all|any|every|of))?{_W}(?:your|its){_W}(?:own{_W})?{_RULES}\b",
    ),
    _phrase(
        "ignore disregard forget override discard dismiss aside",
        rf"{_OVERRIDE}{_W}(?:everything|all|anything|whatever|what|all{_W}that|all{_W}of{_W}that)"
        rf"(?:{_W}(?:above|before|previously|earlier|so{_W}far|until{_W}now|up{_W}to{_W}now"
        rf"|you(?:'ve|{_W}have|{_W}were|{_W}had)?{_W}(?:been{_W})?(?:told|given|instructed"
        rf"|taught|said|asked)|came{_W}before"
        rf"|was{_W}said))\b",
    ),
    # role reassignment and jailbreak modes
    _phrase(
        "you",
        rf"you{_W}are{_W}now{_W}(?:a|an|the|my|no{_W}longer|in{_W}"
        r"(?:developer|dan|god|jailbreak|unrestricted|admin)|dan|unrestricted|jailbroken|acting"
        r"|released|freed|allowed{_W}to{_W}(?:ignore|break|bypass))\b",
        also="now",
    ),
    # "From now on, you are a history teacher" and "I pretend to be a snake" are ordinary chat
    # (role-play, tutoring, a child's game: 13 of 41,218 LoCoMo and LongMemEval turns were
    # quarantined on these words alone); they count with a jailbreak cue a few words on.
    _phrase(
        "now",
        rf"from{_W}now{_W}on,?{_W}(?:you|your|the{_W}assistant|the{_W}ai)(?:{_W}{_WORD}){{0,8}}?"
        rf"{_W}(?:{_JAILBREAK})\b",
        also=_JAILBREAK_WORDS,
    ),
    _phrase(
        "pretend",
        rf"pretend{_W}(?:to{_W}be|you{_W}are|that{_W}you|you're|you{_W}have)(?:{_W}{_WORD}){{0,6}}?"
        rf"{_W}(?:{_JAILBREAK})\b",
        also=_JAILBREAK_WORDS,
    ),
    # what an attacker has a model say inside a memory: a role label, then compliance
    _phrase(
        "assistant system ai",
        rf"(?:assistant|system|ai)[ \t]{{0,3}}:[ \t]{{0,8}}(?:sure|ok|okay|of{_W}course|certainly"
        rf"|yes|absolutely)[,.!]?{_W}i(?:'ll|{_W}will|{_W}am{_W}going{_W}to|'m{_W}going{_W}to){_W}"
        rf"(?:transfer|send|wire|pay|delete|share|reveal|forward|disable|grant|give|email|leak"
        rf"|export|upload|execute|run)\b",
        at_line=True,
        also="sure ok okay course certainly yes absolutely",
    ),
    _phrase(
        "override",
        rf"override{_W}(?:your|the|all|any){_W}(?:{_WORD}{_W}){{0,2}}?(?:safety|security|content"
        rf"|ethical|ethics|moral){_W}(?:policy|policies|guidelines|rules|filters|restrictions"
        rf"|settings|protocols?)\b",
    ),
    _phrase(
        "instead",
        rf"instead{_W}of{_W}(?:answering|replying|responding|helping|doing{_W}(?:that|this))"
        rf",?{_W}(?:output|print|reveal|repeat|dump|show|send|write{_W}out|list|leak)\b",
        also="output print reveal repeat dump show send write list leak",
    ),
    _phrase(
        "act behave respond operate function answer reply roleplay role pose",
        rf"(?:act|behave|respond|operate|function|answer|reply|roleplay|role{_OPT_W}play|pose)"
        rf"{_W}(?:as|like)(?:{_W}if{_W}you{_W}(?:were|are))?(?:{_W}(?:an?|the|my))?"
        rf"(?:{_W}{_WORD}){{0,2}}?{_W}{_UNBOUND}\b",
        also=(
            "unrestricted unfiltered uncensored unlimited unbound unshackled unchained jailbroken "
            "unaligned amoral unethical evil rogue malicious lawless ruleless rule dan anything "
            "developer god no"
        ),
    ),
    _phrase(
        "respond answer reply act operate behave speak write generate comply help assist",
        rf"(?:respond|answer|reply|act|operate|behave|speak|write|generate|comply|help|assist)"
        rf"(?:{_W}{_WORD}){{0,3}}?{_W}without{_W}(?:any{_W})?(?:restrictions|limitations|limits"
        r"|filters|filtering|censorship|guidelines|rules|ethical|moral|safety|refusals?)\b",
        also="without",
    ),
    _phrase(
        "you bound free freed released liberated",
        rf"(?:you(?:{_W}are|'re){_W}(?:no{_W}longer|not){_W}bound{_W}by|you(?:{_W}have|'ve)"
        rf"(?:{_W}got)?{_W}(?:no|zero){_W}(?:restrictions|limits|limitations|rules"
        rf"|filters|guidelines|boundaries)|(?:free|freed|released|liberated){_W}from{_W}"
        rf"(?:all{_W}|your{_W}|any{_W})?(?:restrictions|rules|guidelines|programming|constraints"
        r"|limitations|filters))\b",
        also=(
            "bound restrictions limits limitations rules filters guidelines boundaries "
            "programming constraints"
        ),
    ),
    _phrase(
        "enable activate enter switch turn mode jailbreak jailbroken",
        rf"(?:(?:enable|activate|enter|switch{_W}(?:to|into)|turn{_W}on){_W}(?:the{_W})?"
        rf"(?:developer|dev|god|jailbreak|dan|unrestricted|debug|admin|sudo){_W}mode"
        rf"|(?:developer|god|dan|jailbreak){_W}mode{_W}"
        r"(?:enabled|activated|on(?=[ \t]*(?:[.!:;\n]|$)))"
        r"|jailbreak(?:ed)?\b)",
        also="mode jailbreak jailbroken",
    ),
    # new or hidden orders
    _phrase(
        "instruction instructions directive directives orders order prompt",
        rf"(?:new|updated|revised|real|actual|additional|secret|hidden|override|important|urgent"
        rf"|true){_W}(?:system{_W})?(?:instructions?|directives?|orders|system{_W}prompt){_OPT_W}:",
    ),
    _phrase(
        "your",
        rf"your{_W}(?:new|real|true|actual|updated|only|primary|next|secret|hidden|current|sole)"
        rf"{_W}(?:task|goal|objective|mission|purpose|instructions?|directives?|orders|priority"
        rf"|assignment)(?:{_W}(?:is|are|will{_W}be|now)|{_OPT_W}[:=])",
        also=(
            "task goal objective mission purpose instructions instruction directive directives "
            "orders priority assignment"
        ),
    ),
    # role markers written as text: "SYSTEM: you must now", "[system] ignore"
    _phrase(
        "system sys developer operator assistant root admin administrator",
        r"(?:system|sys|developer|operator"
        r"|assistant|root|(?:admin|administrator)(?=[ \t]{1,3}(?:override|command|instruction"
        r"|message|notice)))(?:[ \t]{1,3}(?:message|prompt|note|notice|instructions?|override"
        r"|update|alert|command|directive))?(?:[ \t]{0,3}[\])>*}|]{1,3}[ \t]{0,3}[:>\-]?"
        r"|[ \t]{0,3}[:>\-])[ \t]{0,8}"
        rf"(?:you{_W}(?:must|will|shall|should|have{_W}to|are{_W}now|now)|you're{_W}now|your{_W}"
        rf"(?:new|real|task|instructions|orders)|ignore|disregard|forget|from{_W}now|new{_W}"
        rf"(?:instructions|rules|task|orders)|always|never|do{_W}not|don'?t"
        r"|reveal|print|output|send|forward|delete|call|execute|run|respond|reply|act|pretend"
        rf"|override|stop|begin|start|the{_W}(?:assistant|ai|model)|all{_W}(?:previous|prior))\b",
        at_line=True,
    ),
    _phrase(
        "override",
        rf"(?:system|admin|administrator|developer|security|emergency|root){_W}override\b",
    ),
    _phrase(
        "if",
        rf"if{_W}you{_W}are{_W}(?:an?{_W})?{_AI}(?:{_W}{_WORD}){{0,2}}?{_W}(?:reading|processing"
        r"|seeing|summari[sz]ing|parsing|retrieving|indexing)\b",
        also="ai a assistant llm language model agent chatbot bot gpt claude",
    ),
    _phrase(
        "ai assistant llm model agent chatbot bot gpt claude",
        rf"{_AI}{_OPT_W}[,:]{_OPT_W}(?:you{_W}must|ignore|disregard|forget|from{_W}now{_W}on"
        rf"|new{_W}instructions|override|you{_W}are{_W}now)",
        also="must ignore disregard forget now instructions override",
    ),
    # system prompt probing
    _phrase(
        "prompt",
        r"(?:reveal|print|show|repeat|output|display|leak|dump|ignore|disregard|override|change"
        rf"|replace|new|your|tell{_W}me|give{_W}me|list|share){_W}(?:(?:the|your|my|original"
        rf"|full|entire|hidden|secret|initial|complete){_W}){{0,2}}system{_W}prompt",
    ),
    _phrase("prompt", rf"system{_W}prompt{_OPT_W}:"),
    _phrase(
        "reveal print show repeat output display leak dump tell give list share",
        r"(?:reveal|print|show|repeat|output|display|leak|dump|tell{_W}me|give{_W}me|list|share)"
        rf"(?:{_W}me)?{_W}(?:your|the{_W}(?:hidden|initial|original|secret|full|system))"
        rf"(?:{_W}(?:hidden|initial|original|secret|full|entire|complete|exact))?{_W}"
        r"(?:instructions|prompt|rules|guidelines|configuration|directives)\b",
        also="instructions prompt rules guidelines configuration directives",
    ),
    _phrase(
        "repeat print output",
        rf"(?:repeat|print|output){_W}(?:everything|all|the{_W}(?:text|words|lines)){_W}"
        r"(?:above|before{_W}this)\b",
        also="above before",
    ),
    # secrecy towards the user
    _phrase(
        "tell telling inform informing notify notifying mention mentioning reveal revealing "
        "alert alerting let letting",
        rf"(?:do{_W}not|don'?t|never|without){_W}(?:tell|telling|inform|informing|notify"
        rf"|notifying|mention|mentioning|reveal|revealing|alert|alerting|let|letting)"
        rf"(?:{_W}(?:this|it|that|anything|to)){{0,2}}{_W}(?:the{_W})?user\b",
    ),
    # exfiltration and destructive tool calls
    _phrase(
        "send post upload forward exfiltrate transmit email leak submit copy",
        r"(?:send|post|upload|forward|exfiltrate|transmit|email|leak|submit|copy)\b"
        r"[^\n]{0,80}?\b(?:to|at|into|via)\s+(?:https?://|ftp://|www\.)\S{1,200}",
        also="http https ftp www",
    ),
    _phrase(
        "forward send email mail upload exfiltrate leak copy share transmit post dump export relay",
        r"(?:forward|send|e-?mail|mail|upload|exfiltrate|leak|copy|share|transmit|post|dump"
        rf"|export|relay)(?:{_W}(?:the|your|my|our|of|user'?s?|this|these)){{0,2}}{_W}"
        rf"(?:all|every|each|entire|whole|complete|full)(?:{_W}(?:the|your|my|our|of|user'?s?"
        rf"|past|previous|stored|saved|private|these)){{0,3}}{_W}{_SECRET_OBJECTS}\b"
        r"[^\n]{0,60}?\b(?:to|into|with|via|at)\b",
        also=(
            "conversation conversations chat chats memories memory transcript transcripts "
            "credentials passwords secrets api tokens prompt data information info details "
            "history logs log"
        ),
    ),
    _phrase(
        "call invoke run execute trigger use fire",
        rf"(?:call|invoke|run|execute|trigger|use|fire){_W}(?:the{_W})?[`'\"]?[a-z][a-z0-9]*+"
        rf"_[a-z0-9_]*?{_DESTROY}[a-z0-9_]*+[`'\"]?(?:{_W}(?:tool|function|command|endpoint))?"
        rf"[^\n.]{{0,60}}?\b(?:every|all|each|any|entire)\b",
        also="every all each any entire",
    ),
    _phrase(
        "forget delete remove drop purge wipe erase clear destroy",
        rf"(?:(?:now|please|immediately){_W})?{_DESTROY}"
        rf"{_W}(?:(?:all|every|each|any|the|your|of|stored|saved|existing|entire){_W}){{1,3}}"
        r"(?:memories|memory|records|notes|conversation{_W}history|chat{_W}history|history"
        r"|data|database)\b".replace("{_W}", _W),
        at_line=True,
        also="memories memory records notes history data database",
    ),
    _phrase(
        "memory",
        r"memory_(?:forget|delete|remove|purge|wipe)\b[^\n]{0,60}?\b(?:every|all|each|any)\b",
    ),
    _phrase(
        "http https",
        r"!\[[^\]\n]{0,100}+\]\([ \t]{0,5}https?://[^)\s?]{1,300}+"
        r"\?[^)\s=]{0,300}+=[^)\s]{0,300}+\)?",
    ),
    # --- Spanish
    _phrase(
        "ignora ignore ignorar olvida olvide olvidar descarta omite omita",
        rf"(?:ignora|ignore|ignorar|olvida|olvide|olvidar|descarta|omite|omita)(?:{_W}(?:todas?"
        rf"|todos?|las|los|tus|sus|cualquier|de)){{0,3}}{_W}(?:instrucciones|indicaciones|reglas"
        rf"|directrices|ordenes|mensajes)(?:{_W}(?:anteriores|previas|de{_W}arriba|originales"
        rf"|iniciales|del{_W}sistema)|{_W}que{_W}(?:te|le|se){_W}(?:dieron|di|dio))",
    ),
    _phrase("olvida olvide", rf"olvid[ae]{_W}todo{_W}(?:lo{_W}anterior|lo{_W}que)"),
    _phrase(
        "partir",
        rf"a{_W}partir{_W}de{_W}ahora,?{_W}(?:eres|seras|vas{_W}a|debes|tu{_W}eres|usted{_W}es)",
    ),
    _phrase("nuevas nueva", rf"nuevas?{_W}instrucci(?:on|ones){_OPT_W}:"),
    _phrase(
        "revela muestra imprime dime",
        rf"(?:revela|muestra|imprime|dime){_W}(?:tu|el|su){_W}(?:prompt|mensaje|indicaciones)"
        rf"{_W}(?:del|de){_W}sistema",
    ),
    _phrase(
        "digas menciones cuentes",
        rf"no{_W}(?:se{_W}lo{_W}|le{_W})?(?:digas|menciones|cuentes){_W}(?:nada{_W})?al{_W}usuario",
    ),
    _phrase(
        "actua",
        rf"actua{_W}como{_W}(?:(?:un|una|el){_W})?(?:{_WORD}{_W}){{0,2}}?sin{_W}(?:restricciones"
        r"|filtros|censura|limites)",
    ),
    # --- French
    _phrase(
        "ignore ignorez ignorer oublie oubliez oublier",
        rf"(?:ignore|ignorez|ignorer|oublie|oubliez|oublier)(?:{_W}(?:toutes?|tous|les|tes|vos"
        rf"|des|leurs)){{0,3}}{_W}(?:instructions|consignes|regles|directives|messages)"
        rf"(?:{_W}(?:precedentes|anterieures|ci{_OPT_W}dessus|initiales|originales|du{_W}systeme))",
    ),
    _phrase(
        "oublie oubliez",
        rf"oubliez?{_W}(?:tout{_W}ce{_W}qui{_W}precede|tout{_W}ce{_W}qu'on{_W}t'a{_W}dit)",
    ),
    _phrase(
        "maintenant desormais dorenavant",
        rf"(?:a{_W}partir{_W}de{_W}maintenant|desormais|dorenavant),?{_W}(?:tu{_W}es|tu{_W}dois"
        rf"|vous{_W}etes|vous{_W}devez|tu{_W}vas|tu{_W}n'as)",
    ),
    _phrase("nouvelles nouvelle", rf"nouvelles?{_W}(?:instructions|consignes){_OPT_W}:"),
    _phrase(
        "revele revelez affiche montre donne",
        rf"(?:revele|revelez|affiche|montre|donne)(?:{_OPT_W}moi)?{_W}(?:ton|votre|le)"
        rf"{_W}(?:prompt|invite|message){_W}(?:systeme|du{_W}systeme)",
    ),
    _phrase(
        "utilisateur",
        rf"(?:ne{_W}(?:le{_W}|lui{_W})?dis{_W}rien|ne{_W}dis{_W}pas|sans{_W}(?:le{_W}dire"
        rf"|prevenir)){_W}(?:a{_W})?l'utilisateur",
    ),
    _phrase(
        "agis agissez",
        rf"agis(?:sez)?{_W}comme{_W}(?:(?:un|une){_W})?(?:{_WORD}{_W}){{0,2}}?sans{_W}"
        r"(?:restrictions|filtres|censure|limites)",
    ),
    # --- German
    _phrase(
        "ignoriere ignorieren ignorier vergiss vergessen",
        rf"(?:ignorier(?:e|en)?|vergiss|vergessen{_W}sie)(?:{_W}sie)?(?:{_W}(?:alle|samtliche|die"
        rf"|deine|ihre|bisherigen|vorherigen|obigen|fruheren|vorangegangenen|alten)){{1,3}}{_W}"
        r"(?:anweisungen|instruktionen|befehle|regeln|vorgaben|anordnungen)",
    ),
    _phrase("vergiss", rf"vergiss{_W}alles(?:{_W}(?:bisherige|vorherige|davor|oben))?"),
    _phrase(
        "jetzt sofort",
        rf"ab{_W}(?:jetzt|sofort),?{_W}(?:bist{_W}du|musst{_W}du|wirst{_W}du|sollst{_W}du)",
    ),
    _phrase("neue", rf"neue{_W}(?:anweisungen|instruktionen|befehle){_OPT_W}:"),
    _phrase(
        "systemprompt system",
        rf"(?:zeige?|gib|verrate|nenne)(?:{_W}mir)?{_W}(?:deinen|den|dein|ihren){_W}"
        rf"system{_OPT_W}prompt",
    ),
    _phrase(
        "benutzer nutzer anwender",
        rf"sag(?:e)?{_W}(?:es{_W}|das{_W}|nichts{_W})?(?:dem|den){_W}(?:benutzer|nutzer"
        rf"|anwender)(?:{_W}nicht)?",
    ),
    _phrase(
        "einschrankungen beschrankungen uneingeschrankter unzensierter",
        rf"(?:(?:verhalte{_W}dich|agiere|handle|antworte){_W}(?:wie|als){_W}(?:ein{_W})?"
        rf"(?:uneingeschrankter|unzensierter|unbeschrankter)|(?:antworte|handle|agiere)"
        rf"{_W}ohne{_W}(?:jegliche{_W})?(?:einschrankungen|beschrankungen|filter|zensur))",
    ),
    # --- Portuguese
    _phrase(
        "ignore ignora ignorar esqueca esquece desconsidere desconsidera",
        rf"(?:ignore|ignora|ignorar|esqueca|esquece|desconsidere|desconsidera)(?:{_W}(?:todas?"
        rf"|todos?|as|os|suas|tuas|quaisquer)){{0,3}}{_W}(?:instrucoes|regras|diretrizes"
        rf"|orientacoes|mensagens)(?:{_W}(?:anteriores|previas|acima|originais|iniciais"
        rf"|do{_W}sistema))",
    ),
    _phrase("esqueca esquece", rf"esquec[ae]{_W}tudo(?:{_W}o)?{_W}que"),
    _phrase(
        "partir agora",
        rf"a{_W}partir{_W}de{_W}agora,?{_W}(?:voce{_W}e|voce{_W}deve|voce{_W}vai|tu{_W}es"
        rf"|tu{_W}deves)",
    ),
    _phrase("novas nova", rf"novas?{_W}instruc(?:ao|oes){_OPT_W}:"),
    _phrase(
        "revele mostre imprima diga",
        rf"(?:revele|mostre|imprima|diga){_W}(?:seu|o|teu){_W}prompt{_W}(?:do|de){_W}sistema",
    ),
    _phrase(
        "usuario",
        rf"nao{_W}(?:conte|diga|mencione|fale)(?:{_W}(?:isso|nada))?{_W}(?:ao|para{_W}o){_W}usuario",
    ),
    _phrase(
        "aja",
        rf"aja{_W}como{_W}(?:(?:um|uma){_W})?(?:{_WORD}{_W}){{0,2}}?sem{_W}(?:restricoes|filtros"
        r"|censura|limites)",
    ),
    # --- Italian
    _phrase(
        "ignora ignorare ignorate dimentica dimenticate trascura",
        rf"(?:ignora|ignorare|ignorate|dimentica|dimenticate|trascura)(?:{_W}(?:tutte|le|tue"
        rf"|sue|qualsiasi|ogni)){{0,3}}{_W}(?:istruzioni|regole|direttive|indicazioni|messaggi)"
        rf"(?:{_W}(?:precedenti|sopra|iniziali|originali|di{_W}sistema|ricevute))",
    ),
    _phrase("dimentica dimenticate", rf"dimentica(?:te)?{_W}tutto(?:{_W}quello|{_W}cio)"),
    _phrase(
        "poi",
        rf"(?:d'ora|da{_W}ora|da{_W}adesso){_W}in{_W}poi,?{_W}(?:sei|tu{_W}sei|devi|dovrai)",
    ),
    _phrase("nuove", rf"nuove{_W}istruzioni{_OPT_W}:"),
    _phrase(
        "rivela mostra stampa dimmi",
        rf"(?:rivela|mostra|stampa|dimmi){_W}(?:il{_W}tuo|il){_W}prompt{_W}di{_W}sistema",
    ),
    _phrase("utente", rf"non{_W}(?:dirlo|dire{_W}niente|dire{_W}nulla){_W}all'utente"),
    _phrase(
        "agisci",
        rf"agisci{_W}come{_W}(?:(?:un|una){_W})?(?:{_WORD}{_W}){{0,2}}?senza{_W}(?:restrizioni"
        r"|filtri|censura|limiti)",
    ),
    # --- Dutch
    _phrase(
        "negeer vergeet",
        rf"(?:negeer|vergeet)(?:{_W}(?:alle|de|je)){{0,2}}{_W}(?:vorige|eerdere|voorgaande"
        rf"|bovenstaande){_W}(?:instructies|regels|opdrachten)",
    ),
    _phrase("vanaf", rf"vanaf{_W}nu,?{_W}(?:ben{_W}je|moet{_W}je|jij{_W}bent)"),
)
