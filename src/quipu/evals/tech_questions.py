"""The questions of the technical-chat generator (:mod:`quipu.evals.tech_corpus`).

Each category has, per split, a lexical template (it names what the evidence names: the model,
the identifier, the error) and a paraphrased one (it describes it in other words); a question
draws one of the two at random. The ``test`` split's templates are never used for ``dev``
chats, so a change tuned on ``dev`` meets unseen phrasings on ``test``.
"""

from __future__ import annotations

import random

__all__ = ["TEMPLATES", "ask"]

#: category -> split -> (lexical, paraphrased) templates over the event's values.
TEMPLATES: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "code": {
        "dev": (
            ("What fields did we put on the {entity} model?",),
            ("How did we define the {noun} table, column by column?",),
        ),
        "test": (
            ("Show me the {entity} model definition again.",),
            ("Which columns does a {noun} have in our schema?",),
        ),
    },
    "identifier": {
        "dev": (
            ("What does `{name}` return when {edge}?",),
            ("If {edge}, how does the `{name}` function behave?",),
        ),
        "test": (
            ("How did we write `{name}`?",),
            ("What happens in `{name}` if {edge}?",),
        ),
    },
    "error_fix": {
        "dev": (
            ("How did we fix the {short} error?",),
            ("What was behind {paraphrase}, and what did we change to stop it?",),
        ),
        "test": (
            ("What caused the {short} error when {action}?",),
            ("Remind me how we got rid of {paraphrase}.",),
        ),
    },
    "decision": {
        "dev": (
            ("Why did we choose {chosen} over {rejected}?",),
            ("What did we decide about {ask}, and for what reason?",),
        ),
        "test": (
            ("What was the reason for going with {chosen}?",),
            ("Why does the project handle {aspect} the way it does?",),
        ),
    },
    "update": {
        "dev": (
            ("What is {setting} now?",),
            ("What did we change {ask} to, and from what?",),
        ),
        "test": (
            ("What value does {setting} have at the moment?",),
            ("Remind me {ask} these days, and what it used to be.",),
        ),
    },
    "multi_session": {
        "dev": (
            ("Which packages did we add to the project?",),
            ("What third-party libraries have we brought in so far, and what for?",),
        ),
        "test": (
            ("List the dependencies we added during the project.",),
            ("Which outside tools did we pull into the app along the way?",),
        ),
    },
    "config": {
        "dev": (
            (
                "Which Postgres image version is pinned in docker-compose.yml?",
                "Which host port is the database mapped to in docker-compose?",
            ),
            (
                "What version of the database do we run locally?",
                "On which port can I reach the local database from my machine?",
            ),
        ),
        "test": (
            (
                "What postgres image tag does our docker-compose use?",
                "What redis image does the compose file run?",
            ),
            (
                "Which release of the database server runs in development?",
                "Which version of the cache server do we run on our machines?",
            ),
        ),
    },
}


def ask(rng: random.Random, category: str, split: str, values: dict[str, str]) -> str:
    """A question of ``category`` for a chat of ``split``, filled with the event's ``values``."""
    lexical, paraphrased = TEMPLATES[category][split]
    templates = lexical if rng.random() < 0.5 else paraphrased
    return rng.choice(templates).format(**values)
