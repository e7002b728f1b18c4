"""The names a query may mention, for ``graph_recall``'s entity lookup. Pure.

Capitalised names as the extractor reads them ("Where does Anna Smith work?" -> "Anna Smith"),
then every word and pair of adjacent words that is not a common word, so a lowercase query
("what does anna do") still finds "Anna" by its folded name or an alias.
"""

from __future__ import annotations

import itertools
import re

from quipu.graph.extract import common_word, names_in

#: The most names one query looks up.
MAX_NAMES = 64
_TOKEN = re.compile(r"[\w'’&-]+")


def query_names(text: str) -> list[str]:
    """Candidate entity names in ``text``, capitalised names first, without repeats."""
    found: dict[str, None] = {}
    for name, _ in names_in(text):
        found.setdefault(name, None)
    words = [w.strip("'’-") for w in _TOKEN.findall(text)]
    words = [w[:-2] if w.endswith(("'s", "’s")) else w for w in words]
    keep = [w for w in words if len(w) >= 2 and not common_word(w)]
    for w in keep:
        found.setdefault(w, None)
    for a, b in itertools.pairwise(words):
        if not common_word(a) and not common_word(b):
            found.setdefault(f"{a} {b}", None)
    return list(found)[:MAX_NAMES]
