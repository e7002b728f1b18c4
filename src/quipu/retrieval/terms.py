"""Turning a query into full-text terms. Pure."""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)

#: Function words that add nothing to a keyword match but make candidate sets huge.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s t don doesn didn isn wasn aren weren won wouldn shouldn couldn ll ve re d m o y
    """.split()
)

MAX_TERMS = 32


def query_terms(query: str) -> list[str]:
    """Distinct lower-cased words of ``query`` minus stop words, in order, at most MAX_TERMS.

    A query made only of stop words keeps them, so it can still match something.
    """
    words = [
        w.casefold().replace("’", "'")
        for w in _WORD.findall(unicodedata.normalize("NFKC", query))
    ]
    words = [w.split("'")[0] for w in words]
    kept = [w for w in words if w and w not in STOPWORDS]
    chosen = kept or [w for w in words if w]
    return list(dict.fromkeys(chosen))[:MAX_TERMS]
