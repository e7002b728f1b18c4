"""`quipu documents add|search|read|list|delete`: the documents plane (DOC-1) from the shell,
and `quipu search`, every plane at once (RECALL-8); on a store (a file or a ``postgresql://``
URL), as the trusted local principal. Output is JSON. Errors print their stable code and exit
1."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from quipu.errors import InvalidInput, QuipuError
from quipu.surfaces.cli.options import Config, Db, Output, fail, settings_or_exit

if TYPE_CHECKING:
    from quipu.documents import Documents

documents = typer.Typer(
    help="Documents of one scope: add, search, read, list, delete (DOC-1).", no_args_is_help=True
)
err = Output(stderr=True)
Scope = Annotated[str, typer.Option(help="agent, user, agent_user or tenant (one scope).")]
_SUFFIXES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".pdf": "application/pdf",
}


def _run(db: str | None, config: Path | None, action: Callable[[Documents], Any]) -> None:
    from quipu.composition import build_runtime, build_service, local_principal
    from quipu.documents import Documents, DocumentService

    settings = settings_or_exit(db, config)
    try:
        service = build_service(settings)
        runtime = build_runtime(settings, service)
    except QuipuError as exc:
        fail(exc, 2)
    plane = Documents(DocumentService(service), local_principal(settings, "cli"))
    try:
        typer.echo(json.dumps(action(plane), ensure_ascii=False, indent=2))
    except QuipuError as exc:
        err.print(f"[red]{escape(exc.code)}:[/red] {escape(exc.message)}")
        if exc.details:
            err.print(escape(json.dumps(exc.details, default=str)))
        raise typer.Exit(1) from None
    finally:
        plane.service.close()
        runtime.close()


def _read(path: Path, kind: str = "text/plain") -> str | bytes:
    try:
        if kind in ("application/pdf", "pdf"):  # the file's bytes; read as its pages' text
            return path.read_bytes()
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read {path}: {exc}", code="invalid_file") from None


@documents.command("add")
def add(
    file: Annotated[
        Path, typer.Argument(help="A UTF-8 text, Markdown or HTML file, or a PDF (pdf extra).")
    ],
    db: Db = None,
    config: Config = None,
    title: Annotated[str | None, typer.Option(help="Title (default: the file name).")] = None,
    media_type: Annotated[
        str | None,
        typer.Option(
            help="text/plain, text/markdown, text/html or application/pdf (default: suffix)."
        ),
    ] = None,
    scope: Scope = "agent",
) -> None:
    """Add FILE as a document: verbatim chunks, screened, embedded."""
    kind = media_type or _SUFFIXES.get(file.suffix.lower(), "text/plain")
    _run(
        db,
        config,
        lambda p: p.add(_read(file, kind), title=title or file.name, media_type=kind, scope=scope),
    )


@documents.command("search")
def search(
    query: str,
    db: Db = None,
    config: Config = None,
    scope: Scope = "agent",
    k: Annotated[int | None, typer.Option("-k", help="How many pointers.")] = None,
) -> None:
    """Pointers (document, offsets, marked snippet, score) to the passages answering QUERY."""
    _run(db, config, lambda p: p.search(query, scope=scope, k=k))


@documents.command("read")
def read(
    document_id: str,
    db: Db = None,
    config: Config = None,
    start: Annotated[int, typer.Option(help="First character offset.")] = 0,
    end: Annotated[int | None, typer.Option(help="Offset after the last character.")] = None,
    scope: Scope = "agent",
) -> None:
    """A bounded range of DOCUMENT_ID's text (withheld chunks named, never shown)."""
    _run(db, config, lambda p: p.read(document_id, start=start, end=end, scope=scope))


@documents.command("list")
def list_(
    db: Db = None,
    config: Config = None,
    scope: Scope = "agent",
    cursor: Annotated[str | None, typer.Option(help="next_cursor of the last page.")] = None,
    limit: Annotated[int | None, typer.Option(help="Page size.")] = None,
) -> None:
    """The documents of one scope's corpus and the model it is pinned to."""
    _run(db, config, lambda p: p.list(scope=scope, cursor=cursor, limit=limit))


@documents.command("delete")
def delete(
    document_id: str,
    db: Db = None,
    config: Config = None,
    scope: Scope = "agent",
    reason: Annotated[str | None, typer.Option(help="Why (audited).")] = None,
) -> None:
    """Delete DOCUMENT_ID logically (it leaves search, list and read)."""
    _run(db, config, lambda p: p.delete(document_id, scope=scope, reason=reason).to_dict())


def search_all(
    query: str,
    db: Db = None,
    config: Config = None,
    scope: Scope = "agent",
    k: Annotated[int | None, typer.Option("-k", help="How many rows in all.")] = None,
    plane: Annotated[
        list[str] | None, typer.Option(help="Only this plane (repeatable; default: all).")
    ] = None,
) -> None:
    """Search every plane of one scope (facts, notes, documents, kv): rows labelled by plane."""
    from quipu.composition import build_runtime, build_service, local_principal
    from quipu.documents import DocumentService
    from quipu.kv import KeyValueService
    from quipu.search import SearchService

    settings = settings_or_exit(db, config)
    try:
        service = build_service(settings)
        runtime = build_runtime(settings, service)
    except QuipuError as exc:
        fail(exc, 2)
    who = local_principal(settings, "cli")
    docs = DocumentService(service)
    try:
        found = SearchService(service, docs, KeyValueService(service)).search(
            who, query, scope=scope, k=k, planes=plane
        )
        typer.echo(json.dumps(found, ensure_ascii=False, indent=2))
    except QuipuError as exc:
        err.print(f"[red]{escape(exc.code)}:[/red] {escape(exc.message)}")
        raise typer.Exit(1) from None
    finally:
        docs.close()
        runtime.close()
