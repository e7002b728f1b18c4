"""`quipu articles write|update|show|history|search|list|erase`: knowledge articles from the shell
(issue 25, KNOW-1, KNOW-2), on a local store as the trusted local principal or on a Quipu server
(``--db http(s)://…``, key in ``QUIPU_API_KEY``) through the same client methods. Text for
people, ``--json`` for scripts; errors print their stable code and exit 1."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol

import typer
from rich.markup import escape

from quipu.core.urls import mask_credentials
from quipu.errors import InvalidInput, QuipuError
from quipu.surfaces.cli import target
from quipu.surfaces.cli.options import (
    AsJson,
    Config,
    Db,
    Output,
    env_key,
    fail,
    print_json,
    rows_table,
    settings_or_exit,
)

if TYPE_CHECKING:
    from quipu.core.knowledge import ArticleVersion, ArticleWrite

articles = typer.Typer(
    help="Knowledge articles: write, update, show, history, search, list, erase (KNOW-1).",
    no_args_is_help=True,
)
out = Output()
err = Output(stderr=True)

Tags = Annotated[list[str] | None, typer.Option("--tag", help="A tag (repeatable).")]
BodyText = Annotated[str | None, typer.Option("--body", help="The body (Markdown).")]
BodyFile = Annotated[
    Path | None, typer.Option("--file", help="Read the body from this UTF-8 file ('-': stdin).")
]
Category = Annotated[str | None, typer.Option(help="Category.")]
Visibility = Annotated[str | None, typer.Option(help="tenant (default) or owner.")]
Status = Annotated[str | None, typer.Option(help="published (default) or draft.")]


class _Rows(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


class ArticleClient(Protocol):
    """What these commands call: the embedded client and :class:`quipu.Client` both have it."""

    def knowledge_create(
        self,
        title: str,
        body: str,
        *,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        project: str | None = None,
        visibility: str = "tenant",
        status: str = "published",
    ) -> ArticleWrite: ...

    def knowledge_update(
        self,
        article_id: str,
        *,
        expected_version: int,
        title: str | None = None,
        body: str | None = None,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        visibility: str | None = None,
        status: str | None = None,
        reason: str | None = None,
    ) -> ArticleWrite: ...

    def knowledge_get(self, article_id: str, *, as_of: str | None = None) -> ArticleVersion: ...

    def knowledge_history(self, article_id: str) -> list[ArticleVersion]: ...

    def knowledge_search(
        self,
        query: str,
        *,
        k: int | None = None,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        project: str | None = None,
    ) -> _Rows: ...

    def knowledge_erase(self, article_id: str, *, reason: str) -> bool: ...

    def knowledge_list(
        self,
        *,
        status: str | None = None,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        project: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> _Rows: ...

    def close(self) -> None: ...


def _run(
    db: str | None,
    config: Path | None,
    action: Callable[[ArticleClient], Any],
    as_json: bool,
    show: Callable[[Any], None],
) -> None:
    settings = settings_or_exit(db, config, server_ok=True)
    key = env_key() if target.is_server(settings) else None
    try:
        client: ArticleClient = target.open_client(settings, key)  # type: ignore[assignment]
    except QuipuError as exc:
        fail(exc, 2)
    try:
        data = action(client)
    except QuipuError as exc:
        err.print(f"[red]{escape(exc.code)}:[/red] {escape(mask_credentials(exc.message))}")
        if exc.details:
            err.print(escape(json.dumps(exc.details, default=str)))
        hint = target.hint(exc, settings, key)
        if hint:
            err.print(escape(hint))
        raise typer.Exit(1) from None
    finally:
        client.close()
    if as_json:
        print_json(data)
    else:
        show(data)


def _body(text: str | None, file: Path | None, *, required: bool) -> str | None:
    if text is not None and file is not None:
        raise InvalidInput("give --body or --file, not both", code="invalid_body")
    if file is not None:
        try:
            return (
                typer.get_text_stream("stdin").read()
                if str(file) == "-"
                else file.read_text(encoding="utf-8")
            )
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"cannot read {file}: {exc}", code="invalid_file") from None
    if text is None and required:
        raise InvalidInput(
            "an article needs a body: --body TEXT or --file PATH", code="invalid_body"
        )
    return text


def _written(data: dict[str, Any]) -> None:
    article = data["article"]
    line = f"{data['verdict']}: {article['id']} v{article['version']} {article['status']}"
    if data.get("similar_to"):
        line += f" (resembles {data['similar_to']}, similarity {data['similarity']})"
    out.print(escape(line))


def _article(data: dict[str, Any]) -> None:
    tags = ", ".join(data["tags"]) or "-"
    out.print(escape(f"{data['title']}  ({data['id']} v{data['version']}, {data['status']})"))
    out.print(escape(f"category: {data['category'] or '-'}; tags: {tags}; {data['visibility']}"))
    out.print()
    out.print(escape(data["body"]), highlight=False)


def _versions(data: list[dict[str, Any]]) -> None:
    columns = ["version", "relation", "status", "title", "actor", "recorded_at", "reason"]
    out.print(rows_table(data, columns, out.width))


def _hits(data: dict[str, Any]) -> None:
    out.print(rows_table(data["results"], ["id", "score", "title", "snippet"], out.width))


def _fail_early(build: Callable[[], Any]) -> Any:
    """Arguments checked before a store is opened: a bad one is its coded error, exit 1."""
    try:
        return build()
    except QuipuError as exc:
        err.print(f"[red]{escape(exc.code)}:[/red] {escape(exc.message)}")
        raise typer.Exit(1) from None


@articles.command("write")
def write(
    title: str,
    db: Db = None,
    config: Config = None,
    body: BodyText = None,
    file: BodyFile = None,
    category: Category = None,
    tag: Tags = None,
    project: Annotated[str | None, typer.Option(help="Project id.")] = None,
    visibility: Visibility = None,
    status: Status = None,
    as_json: AsJson = False,
) -> None:
    """Write a new article TITLE through the novelty gate: created, gated_to_draft (a near
    duplicate, stored as a draft) or deduplicated (the existing article)."""
    text = _fail_early(lambda: _body(body, file, required=True))
    _run(
        db,
        config,
        lambda c: c.knowledge_create(
            title,
            text,
            category=category,
            tags=tag,
            project=project,
            visibility=visibility or "tenant",
            status=status or "published",
        ).to_dict(),
        as_json,
        _written,
    )


@articles.command("update")
def update(
    article_id: str,
    expected_version: Annotated[
        int, typer.Option("--expected-version", help="The version you read (LIFE-2).")
    ],
    db: Db = None,
    config: Config = None,
    title: Annotated[str | None, typer.Option(help="New title.")] = None,
    body: BodyText = None,
    file: BodyFile = None,
    category: Category = None,
    tag: Tags = None,
    visibility: Visibility = None,
    status: Status = None,
    reason: Annotated[str | None, typer.Option(help="Why (audited).")] = None,
    as_json: AsJson = False,
) -> None:
    """Change ARTICLE_ID (a new version, through the novelty gate)."""
    text = _fail_early(lambda: _body(body, file, required=False))
    _run(
        db,
        config,
        lambda c: c.knowledge_update(
            article_id,
            expected_version=expected_version,
            title=title,
            body=text,
            category=category,
            tags=tag,
            visibility=visibility,
            status=status,
            reason=reason,
        ).to_dict(),
        as_json,
        _written,
    )


@articles.command("show")
def show(
    article_id: str,
    db: Db = None,
    config: Config = None,
    as_of: Annotated[str | None, typer.Option(help="ISO 8601 instant: the version then.")] = None,
    as_json: AsJson = False,
) -> None:
    """ARTICLE_ID's current version (or the one current at --as-of), body included."""
    _run(
        db, config, lambda c: c.knowledge_get(article_id, as_of=as_of).to_dict(), as_json, _article
    )


@articles.command("history")
def history(article_id: str, db: Db = None, config: Config = None, as_json: AsJson = False) -> None:
    """Every version of ARTICLE_ID, oldest first."""
    _run(
        db,
        config,
        lambda c: [v.to_dict() for v in c.knowledge_history(article_id)],
        as_json,
        _versions,
    )


@articles.command("search")
def search(
    query: str,
    db: Db = None,
    config: Config = None,
    k: Annotated[int | None, typer.Option("-k", help="How many articles.")] = None,
    category: Category = None,
    tag: Tags = None,
    project: Annotated[str | None, typer.Option(help="Project id.")] = None,
    as_json: AsJson = False,
) -> None:
    """The articles answering QUERY: id, score, title and a bounded snippet (never the body)."""
    _run(
        db,
        config,
        lambda c: c.knowledge_search(
            query, k=k, category=category, tags=tag, project=project
        ).to_dict(),
        as_json,
        _hits,
    )


@articles.command("erase")
def erase(
    article_id: str,
    reason: Annotated[str, typer.Option(help="Why (required; audited).")],
    db: Db = None,
    config: Config = None,
    as_json: AsJson = False,
) -> None:
    """Erase ARTICLE_ID's content in every version (admins or the memory:erase grant)."""
    _run(
        db,
        config,
        lambda c: {"id": article_id, "erased": c.knowledge_erase(article_id, reason=reason)},
        as_json,
        lambda d: out.print(escape(f"erased {d['id']}" if d["erased"] else "nothing to erase")),
    )


def _listed(data: dict[str, Any]) -> None:
    columns = ["id", "version", "status", "visibility", "category", "title"]
    out.print(rows_table(data["items"], columns, out.width))
    if data.get("next_cursor"):
        out.print(escape(f"more: --cursor {data['next_cursor']}"))


@articles.command("list")
def list_(
    db: Db = None,
    config: Config = None,
    status: Annotated[str | None, typer.Option(help="draft or published.")] = None,
    category: Category = None,
    tag: Tags = None,
    project: Annotated[str | None, typer.Option(help="Project id.")] = None,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of the page before.")] = None,
    limit: Annotated[int | None, typer.Option(help="Page size (1 to 200).")] = None,
    as_json: AsJson = False,
) -> None:
    """The articles you may read, by id, one page (summaries, never the body); --cursor for
    the next page."""
    _run(
        db,
        config,
        lambda c: c.knowledge_list(
            status=status,
            category=category,
            tags=tag,
            project=project,
            cursor=cursor,
            limit=limit,
        ).to_dict(),
        as_json,
        _listed,
    )
