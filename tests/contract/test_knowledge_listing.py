"""Listing knowledge articles on every backend (issue 25, KNOW-1, SCOPE-7): a page of the
articles the caller may read, by id, with status, category, tag and project filters, cursor
pages of a bounded size, summaries without bodies; the read rules of KNOW-1 (agents published
articles and their own, ``owner`` visibility for its owner and admins, nothing of another
tenant) and hostile filter values refused with stable 422 codes."""

from __future__ import annotations

import pytest

from quipu.core.knowledge import ArticleStatus
from quipu.core.records import Principal, Role
from quipu.errors import InvalidInput
from quipu.knowledge import KnowledgeService
from quipu.memories import MemoryService
from tests.support.projects import register

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops")
USER = Principal("t1", "key-user", Role.USER, user_id="u-1")
FOREIGN = Principal("t2", "key-foreign", Role.ADMIN, agent_id="ops")


BODIES = [
    "Restart the queue worker when its lag passes five minutes.",
    "The coffee machine on floor 3 is descaled every Friday.",
    "Payroll closes on the 25th; late expenses roll to next month.",
    "We chose PostgreSQL over MongoDB for the billing ledger in 2023.",
    "Visitors sign in at the front desk and wear a badge.",
    "TLS certificates renew automatically thirty days before expiry.",
    "The design review meets on Thursdays at two in room Juniper.",
]


@pytest.fixture
def kb(service: MemoryService) -> KnowledgeService:
    return KnowledgeService(service)


def _listed(kb: KnowledgeService, who: Principal, **filters: object) -> list[str]:
    """Every id of the listing, walking its pages two at a time."""
    ids: list[str] = []
    cursor = None
    for _ in range(50):
        page = kb.list_articles(who, cursor=cursor, limit=2, **filters)  # type: ignore[arg-type]
        assert len(page.items) <= 2
        ids += [a.id for a in page.items]
        cursor = page.next_cursor
        if cursor is None:
            return ids
    raise AssertionError("the listing never ended")


def test_know_001_listing_follows_the_read_rules(
    kb: KnowledgeService, alice: Principal, bob: Principal
) -> None:
    pub = kb.create(ADMIN, "Staging deploys", "Run make deploy-staging with the VPN on.").article
    draft = kb.create(ADMIN, "Coffee rota", "Facilities descale on Fridays.", status="draft")
    hidden = kb.create(ADMIN, "Incident budget", "Twelve hours for Q3.", visibility="owner").article
    mine = kb.create(alice, "Alice's draft", "Alice rebases, never merges.", status="draft")
    own = kb.create(alice, "Alice only", "Alice's token is in the grey safe.", visibility="owner")
    every = {pub.id, draft.article.id, hidden.id, mine.article.id, own.article.id}
    assert set(_listed(kb, ADMIN)) == every
    assert set(_listed(kb, bob)) == {pub.id}  # an agent: published only, nobody's drafts
    assert set(_listed(kb, alice)) == {pub.id, mine.article.id, own.article.id}
    # other roles read tenant drafts too, never an owner-only article
    assert set(_listed(kb, USER)) == {pub.id, draft.article.id, mine.article.id}
    assert _listed(kb, FOREIGN) == []
    assert _listed(kb, bob, status="draft") == []
    assert _listed(kb, alice, status="draft") == [mine.article.id]


def test_know_001_listing_filters_pages_and_summaries(kb: KnowledgeService) -> None:
    made = [
        kb.create(
            ADMIN,
            f"Runbook {n}",
            BODIES[n],
            category="runbook" if n % 2 else "decision",
            tags=["ops", f"n{n}"],
            status="draft" if n == 4 else "published",
        ).article
        for n in range(7)
    ]
    assert [a.related_id for a in made] == [None] * 7  # none gated to a draft
    ids = sorted(a.id for a in made)
    assert _listed(kb, ADMIN) == ids  # by id, every page, no repeats
    first = kb.list_articles(ADMIN, limit=3)
    assert [a.id for a in first.items] == ids[:3] and first.next_cursor == ids[2]
    rest = kb.list_articles(ADMIN, cursor=first.next_cursor)
    assert [a.id for a in rest.items] == ids[3:] and rest.next_cursor is None
    row = first.items[0].to_dict()
    assert "body" not in row and row["title"].startswith("Runbook")
    assert set(row) >= {"id", "version", "title", "category", "tags", "status", "visibility"}
    runbooks = {a.id for a in made if a.category == "runbook"}
    assert set(_listed(kb, ADMIN, category="runbook")) == runbooks
    assert _listed(kb, ADMIN, tags=["n3", "ops"]) == [made[3].id]
    assert _listed(kb, ADMIN, tags=["n3", "n5"]) == []
    assert _listed(kb, ADMIN, status="draft") == [made[4].id]
    assert len(_listed(kb, ADMIN, status="published")) == 6
    # a cursor past the end is an empty last page; an unknown id still orders
    assert kb.list_articles(ADMIN, cursor="z" * 40).items == []
    assert [a.id for a in kb.list_articles(ADMIN, cursor="0").items] == ids
    # a write shows at once: the new version, and an erased article is gone
    changed = kb.update(ADMIN, made[0].id, expected_version=1, tags=["ops", "moved"])
    assert kb.erase(ADMIN, made[1].id, reason="obsolete")
    listed = {a.id: a for a in kb.list_articles(ADMIN).items}
    assert made[1].id not in listed and listed[made[0].id].version == changed.article.version
    assert listed[made[0].id].tags == ("ops", "moved")
    assert listed[made[4].id].status is ArticleStatus.DRAFT


def test_know_001_listing_by_project(kb: KnowledgeService) -> None:
    """The project partition as a search reads it (SCOPE-6): without a project, articles of
    none; with one, that project's and those of none."""
    register(kb.store, "t1", "apollo", "gemini")
    plain = kb.create(ADMIN, "Tenant-wide", "Everyone parks on level two.").article
    apollo = kb.create(ADMIN, "Apollo", "Apollo ships on Mondays.", project="apollo").article
    gemini = kb.create(ADMIN, "Gemini", "Gemini freezes in August.", project="gemini").article
    assert _listed(kb, ADMIN) == [plain.id]
    assert set(_listed(kb, ADMIN, project="apollo")) == {plain.id, apollo.id}
    assert set(_listed(kb, ADMIN, project="gemini")) == {plain.id, gemini.id}
    assert _listed(kb, ADMIN, project="unregistered") == [plain.id]


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("cursor", "../x", "invalid_cursor"),
        ("cursor", "", "invalid_cursor"),
        ("cursor", "id\x00nul", "invalid_cursor"),
        ("cursor", "a/b", "invalid_cursor"),
        ("cursor", "x" * 500, "invalid_cursor"),
        ("cursor", "\ud800", "invalid_cursor"),
        ("cursor", 7, "invalid_cursor"),
        ("limit", 0, "invalid_limit"),
        ("limit", 201, "invalid_limit"),
        ("limit", 10**30, "invalid_limit"),
        ("limit", True, "invalid_limit"),
        ("limit", "3", "invalid_limit"),
        ("limit", 2.5, "invalid_limit"),
        ("status", "erased", "invalid_status"),
        ("status", "everything", "invalid_status"),
        ("status", ["draft"], "invalid_status"),
        ("category", ["nested"], None),
        ("category", "bad\ud800", None),
        ("category", "c" * 65, None),
        ("tags", "ops", None),
        ("tags", ["ok", "\x00"], None),
        ("tags", [{"deep": [[[]]]}], None),
        ("project", "../etc", "invalid_id"),
        ("project", "p\x1fsep", "invalid_id"),
    ],
)
def test_know_001_listing_refuses_hostile_filters(
    kb: KnowledgeService, field: str, value: object, code: str | None
) -> None:
    kb.create(ADMIN, "Staging deploys", "Run make deploy-staging with the VPN on.")
    with pytest.raises(InvalidInput) as bad:
        kb.list_articles(ADMIN, **{field: value})  # type: ignore[arg-type]
    assert bad.value.status == 422
    if code is not None:
        assert bad.value.code == code
