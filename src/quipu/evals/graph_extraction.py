"""Scoring the entity graph's extractor (issue 26) on hand-labelled sentences.

Each labelled row (tests/data/graph_extraction_labels.jsonl) holds a sentence from a public
dialogue (its source id: ``locomo:<conversation>:<dialog id>:s<n>`` or
``longmemeval:<session>:t<turn>:s<n>``), its speaker, the named entities in it with their types,
and the facts it states in the extractor's predicate vocabulary (subject ``user`` for the
unattributed first person). The extractor reads ``"<speaker>: <sentence>"`` for a LoCoMo row
(as the benchmarks index turns) and the bare sentence for a LongMemEval user turn.

Entities match on their folded names (:func:`quipu.core.graph.folded_name`, trailing
punctuation dropped); the speaker's own entity and the ``user`` entity are left out of both
sides unless the sentence names them. Facts match on (subject, predicate, object or value),
folded. Reported: entity precision, recall and type accuracy (of matched entities), fact
precision and recall, with the counts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from quipu.core.graph import SELF_NAME, folded_name
from quipu.graph.extract import extract


def _key(name: str) -> str:
    return folded_name(name).rstrip("+.!?,;:'\"")


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def score(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    tp = fp = fn = typed = count = 0
    ftp = ffp = ffn = 0
    wrong: list[dict[str, Any]] = []
    for row in rows:
        count += 1
        speaker = str(row["speaker"])
        locomo = str(row["id"]).startswith("locomo:")
        found = extract(f"{speaker}: {row['text']}" if locomo else str(row["text"]))
        skip = {_key(speaker), SELF_NAME} if locomo else {SELF_NAME}
        gold = {_key(n): t for n, t in row["entities"]}
        named = {k for k in gold if k in skip}
        got = {_key(m.name): m.type for m in found.mentions}
        got = {k: t for k, t in got.items() if k not in skip or k in named}
        hit = set(got) & set(gold)
        tp += len(hit)
        fp += len(set(got) - hit)
        fn += len(set(gold) - hit)
        typed += sum(1 for k in hit if got[k] == gold[k])
        gold_facts = {(_key(s), p, _key(o)) for s, p, o in row["facts"]}
        names = [m.name for m in found.mentions]
        got_facts = {
            (
                _key(names[f.subject]),
                f.predicate,
                _key(names[f.object] if f.object is not None else str(f.value)),
            )
            for f in found.facts
        }
        ftp += len(got_facts & gold_facts)
        ffp += len(got_facts - gold_facts)
        ffn += len(gold_facts - got_facts)
        if got_facts - gold_facts:
            wrong.append({"id": row["id"], "extracted": sorted(got_facts - gold_facts)})
    return {
        "sentences": count,
        "entity": {
            "precision": round(tp / max(1, tp + fp), 3),
            "recall": round(tp / max(1, tp + fn), 3),
            "type_accuracy": round(typed / max(1, tp), 3),
            "true_positives": tp,
            "false_positives": fp,
            "false_negatives": fn,
        },
        "fact": {
            "precision": round(ftp / max(1, ftp + ffp), 3),
            "recall": round(ftp / max(1, ftp + ffn), 3),
            "true_positives": ftp,
            "false_positives": ffp,
            "false_negatives": ffn,
        },
        "wrong_facts": wrong,
    }
