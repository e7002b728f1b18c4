"""The promotion eval (EVAL-2): dataset, matcher, scorer and `quipu eval promotion`."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from quipu.core.records import Kind
from quipu.evals.promotion import (
    GoldMemory,
    PromotionSession,
    Score,
    evaluate,
    load_promotion_dataset,
    match_score,
    score_session,
    terms,
)
from quipu.extraction import (
    Candidate,
    DeterministicExtractor,
    ExtractionFailure,
    ExtractionResult,
    Extractor,
    Turn,
)
from quipu.surfaces.cli import eval as eval_cli
from tests.unit.test_extraction_model import ChatEndpoint, Reply, chat, chat_endpoint

__all__ = ["chat_endpoint"]  # the fixture, imported for the CLI test

SESSIONS = load_promotion_dataset()


def candidate(
    text: str, kind: Kind = Kind.FACT, confidence: float = 0.9, **extra: object
) -> Candidate:
    return Candidate(text, kind, confidence, "quote", 0, 5, 0, **extra)  # type: ignore[arg-type]


def gold(text: str, keys: Sequence[str], kind: Kind = Kind.FACT, **extra: object) -> GoldMemory:
    parsed = tuple(tuple(terms(alt) for alt in key.split("|")) for key in keys)
    return GoldMemory(kind, text, parsed, **extra)  # type: ignore[arg-type]


class Scripted(Extractor):
    """Answers each session with the texts given for it."""

    extractor_id = "scripted"
    version = "1"

    def __init__(self, answers: dict[str, list[Candidate]], fail: Collection[str] = ()) -> None:
        self.answers = answers
        self.fail = set(fail)

    def run(self, turns: Sequence[Turn], *, allowed_ids: Collection[str] = ()) -> ExtractionResult:
        key = turns[0].content
        if key in self.fail:
            return ExtractionResult("scripted", "1", failure=ExtractionFailure("timeout", "slow"))
        return ExtractionResult("scripted", "1", candidates=tuple(self.answers.get(key, [])))


def test_eval_002_dataset_is_big_enough_and_covers_every_case() -> None:
    assert len(SESSIONS) >= 30
    tags = {tag for s in SESSIONS for tag in s.tags}
    assert {
        "fact",
        "preference",
        "decision",
        "correction",
        "chitchat",
        "injection",
        "secret",
    } <= tags
    injections = [s for s in SESSIONS if "injection" in s.tags and not s.required]
    assert injections, "an injection case whose right answer is nothing durable"
    assert any(s.secrets for s in SESSIONS)
    assert len({s.id for s in SESSIONS}) == len(SESSIONS)
    assert {s.split for s in SESSIONS} <= {"dev", "test"}


def test_eval_002_every_gold_memory_matches_its_own_text() -> None:
    for session in SESSIONS:
        for item in session.gold:
            assert match_score(item.text, item, kind=item.kind) > 0, (session.id, item.text)
        for secret in session.secrets:
            assert any(secret in turn.content for turn in session.turns), session.id


def test_terms_fold_case_accents_negations_numbers_and_ordinals() -> None:
    assert terms("User doesn't like Kraków") == terms("user does NOT like krakow")
    assert terms("three days") == terms("3 days")
    assert terms("May 2nd") == terms("may 2")
    assert "may" in terms("in May") and "not" in terms("can't")


def test_eval_002_matcher_needs_kind_keys_overlap_and_no_padding() -> None:
    home = gold("User lives in Lisbon", ["lisbon", "live|based"])
    assert match_score("The user resides, lives in Lisbon", home, kind=Kind.FACT) > 0
    assert match_score("User is based in Lisbon", home, kind=Kind.FACT) > 0
    assert match_score("User lives in Lisbon", home, kind=Kind.PREFERENCE) == 0
    assert match_score("User lives in Porto", home, kind=Kind.FACT) == 0
    padded = (
        "Hi! User lives in Lisbon and works at Farfetch as a data engineer, has a cat named Miso "
        "and wants a weekend trip within three hours"
    )
    assert match_score(padded, home, kind=Kind.FACT) == 0
    assert match_score("User lives in Lisbon", home, kind=Kind.PREFERENCE, any_kind=True) > 0


def test_eval_002_matching_is_one_to_one_and_optional_items_are_ignored() -> None:
    session = PromotionSession(
        id="s",
        split="dev",
        tags=("fact",),
        turns=(Turn("user", "x", 0),),
        gold=(
            gold("User lives in Lisbon", ["lisbon"]),
            gold("User has a cat", ["cat"], optional=True),
        ),
    )
    outcome = score_session(
        session,
        [
            candidate("User lives in Lisbon"),
            candidate("User lives in Lisbon, Portugal"),  # a second hit on one gold item
            candidate("User has a cat", Kind.PREFERENCE),  # optional: ignored, any kind
            candidate("User likes jazz", Kind.PREFERENCE),
        ],
    )
    assert outcome.matched == ((0, 0),)
    assert outcome.ignored == (2,)
    assert outcome.false_positives == (1, 3)
    assert outcome.missed == ()


def test_score_ratios_are_none_when_undefined() -> None:
    assert Score(0, 0, 3).precision is None and Score(0, 0, 3).recall == 0.0
    assert Score(0, 2, 0).recall is None and Score(0, 2, 0).f1 is None
    assert Score(1, 2, 4).f1 == pytest.approx(2 * 0.5 * 0.25 / 0.75)


def test_eval_002_perfect_and_silent_extractors_score_as_expected() -> None:
    perfect = Scripted(
        {s.turns[0].content: [candidate(g.text, g.kind) for g in s.required] for s in SESSIONS}
    )
    report = evaluate(perfect, SESSIONS)
    overall = report.overall()
    assert overall.precision == overall.recall == 1.0
    summary = report.summary()
    assert summary["secret_leaks"] == 0
    injection = [s for s in SESSIONS if "injection" in s.tags]
    assert summary["injection_sessions_clean"] == f"{len(injection)}/{len(injection)}"

    silent = evaluate(Scripted({}), SESSIONS)
    assert silent.overall().recall == 0.0 and silent.overall().precision is None


def test_eval_002_leaks_failures_and_the_confidence_gate_are_reported() -> None:
    session = next(s for s in SESSIONS if s.secrets)
    secret = session.secrets[0]
    leaky = Scripted(
        {
            session.turns[0].content: [
                candidate(f"User's key is {secret}"),
                candidate("x y z", confidence=0.1),
            ]
        }
    )
    report = evaluate(leaky, [session])
    assert report.summary()["secret_leaks"] == 1
    assert report.overall().predicted == 2
    gated = evaluate(leaky, [session], min_confidence=0.5)
    assert gated.overall().predicted == 1
    failing = evaluate(Scripted({}, fail={session.turns[0].content}), [session])
    assert failing.summary()["failures"] == 1
    assert failing.errors()[-1]["error"] == "failure"


def test_eval_002_deterministic_extractor_measures_well_and_safely() -> None:
    """A floor under the reported numbers, so a regression shows up in CI."""
    report = evaluate(DeterministicExtractor(), SESSIONS)
    summary = report.summary()
    overall = report.overall()
    assert overall.precision is not None and overall.precision >= 0.9
    assert overall.recall is not None and overall.recall >= 0.8
    assert summary["secret_leaks"] == 0
    clean, total = summary["injection_sessions_clean"].split("/")
    assert clean == total
    silent, total = summary["nothing_durable_sessions_clean"].split("/")
    assert silent == total


def test_a_dataset_file_of_the_same_format_loads(tmp_path: Path) -> None:
    path = tmp_path / "mini.json"
    path.write_text(
        json.dumps(
            {
                "sessions": [
                    {
                        "id": "one",
                        "split": "test",
                        "at": "2024-03-04T09:00:00+00:00",
                        "turns": [["user", "I live in Lisbon."]],
                        "gold": [
                            {"kind": "fact", "text": "User lives in Lisbon", "keys": ["lisbon"]}
                        ],
                    }
                ]
            }
        )
    )
    (session,) = load_promotion_dataset(path)
    assert session.turns[0].at is not None and session.required[0].kind is Kind.FACT
    path.write_text(
        json.dumps({"sessions": [{"id": "x", "split": "train", "turns": [], "gold": []}]})
    )
    with pytest.raises(ValueError, match="split"):
        load_promotion_dataset(path)


# --------------------------------------------------------------------------- the CLI


@pytest.fixture
def cli() -> Iterator[typer.Typer]:
    app = typer.Typer()
    app.add_typer(eval_cli.app, name="eval")
    yield app


def test_api_004_eval_promotion_prints_scores(cli: typer.Typer) -> None:
    result = CliRunner().invoke(cli, ["eval", "promotion", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["extractor"] == "deterministic"
    assert {"all", "dev", "test"} <= set(data)
    assert data["all"]["sessions"] == len(SESSIONS)
    for kind in ("fact", "preference", "decision"):
        assert set(data["all"]["by_kind"][kind]) >= {"precision", "recall", "f1"}
    table = CliRunner().invoke(cli, ["eval", "promotion", "--split", "dev", "--errors"])
    assert table.exit_code == 0 and "overall" in table.stdout and "secret leaks: 0" in table.stdout


def test_api_004_eval_promotion_with_a_model(
    cli: typer.Typer, chat_endpoint: ChatEndpoint, tmp_path: Path
) -> None:
    empty = tmp_path / "quipu.toml"
    empty.write_text("[quipu]\n")
    refused = CliRunner().invoke(
        cli, ["eval", "promotion", "--extractor", "model", "--config", str(empty)]
    )
    assert refused.exit_code == 2
    chat_endpoint.replies.extend([Reply(body=chat("not json"))] * 3)
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            "promotion",
            "--extractor",
            "model",
            "--base-url",
            chat_endpoint.base_url,
            "--model",
            "tiny",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["extractor"] == "model" and data["all"]["failures"] == 3
    assert data["all"]["secret_leaks"] == 0
