"""`quipu tenants|keys|tokens`: operator commands on the store itself (no open admin endpoint)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from quipu.errors import QuipuError
from quipu.surfaces.cli.options import (
    Config,
    Db,
    Output,
    fail,
    key_or_exit,
    rows_table,
    settings_or_exit,
)

if TYPE_CHECKING:
    from quipu.core.records import Principal

tenants = typer.Typer(help="Create and list tenants.", no_args_is_help=True)
keys = typer.Typer(help="Create, list and revoke API keys.", no_args_is_help=True)
tokens = typer.Typer(help="Mint short-lived run tokens from a service key.", no_args_is_help=True)
console = Output()
err = Output(stderr=True)

Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]
Tenant = Annotated[str, typer.Option("--tenant", help="Tenant id.")]


def _with_access(db: str | None, config: Path | None, action: Any) -> Any:
    from quipu.composition import build_access, build_store

    settings = settings_or_exit(db, config)
    store = build_store(settings)
    try:
        return action(build_access(settings, store))
    except QuipuError as exc:
        fail(exc, 1)
    finally:
        store.close()


def _out(data: Any, as_json: bool, columns: list[str]) -> None:
    if as_json:
        sys.stdout.write(json.dumps(data, default=str) + "\n")
        return
    rows = data if isinstance(data, list) else [data]
    console.print(rows_table(rows, columns, console.width))


@tenants.command("create")
def tenants_create(
    tenant_id: str,
    name: Annotated[str | None, typer.Option(help="Display name.")] = None,
    db: Db = None,
    config: Config = None,
    as_json: Json = False,
) -> None:
    """Create a tenant."""
    tenant = _with_access(db, config, lambda a: a.create_tenant(tenant_id, name))
    _out(
        {
            "tenant_id": tenant.tenant_id,
            "name": tenant.name,
            "created_at": tenant.created_at.isoformat(),
        },
        as_json,
        ["tenant_id", "name", "created_at"],
    )


@tenants.command("list")
def tenants_list(db: Db = None, config: Config = None, as_json: Json = False) -> None:
    """List tenants."""
    found = _with_access(db, config, lambda a: a.list_tenants())
    _out(
        [
            {"tenant_id": t.tenant_id, "name": t.name, "created_at": t.created_at.isoformat()}
            for t in found
        ],
        as_json,
        ["tenant_id", "name", "created_at"],
    )


@keys.command("create")
def keys_create(
    tenant: Tenant,
    role: Annotated[str, typer.Option(help="agent, user, service, admin or superadmin.")],
    name: Annotated[str | None, typer.Option(help="A label for people.")] = None,
    agent_id: Annotated[str | None, typer.Option(help="Agent this key acts as.")] = None,
    user_id: Annotated[str | None, typer.Option(help="End user this key acts for.")] = None,
    grant: Annotated[list[str] | None, typer.Option(help="Grant, e.g. tenant:write.")] = None,
    expires_days: Annotated[int | None, typer.Option(help="Expire after N days.")] = None,
    db: Db = None,
    config: Config = None,
    as_json: Json = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print only the secret (for scripts).")
    ] = False,
) -> None:
    """Create an API key. The secret is printed once; only its hash is stored."""
    expires = None if expires_days is None else datetime.now(UTC) + timedelta(days=expires_days)
    credential, secret = _with_access(
        db,
        config,
        lambda a: a.create_key(
            tenant,
            role,
            name=name,
            agent_id=agent_id,
            user_id=user_id,
            grants=set(grant or []),
            expires_at=expires,
        ),
    )
    data = {**credential.to_dict(), "secret": secret}
    if quiet:
        sys.stdout.write(secret + "\n")
        return
    if as_json:
        _out(data, True, [])
        return
    console.print(f"key {credential.key_id} ({credential.role.value}) for tenant {tenant}")
    console.print(f"secret (shown once): [bold]{secret}[/bold]")


@keys.command("list")
def keys_list(tenant: Tenant, db: Db = None, config: Config = None, as_json: Json = False) -> None:
    """List a tenant's keys and run tokens (never their secrets)."""
    found = _with_access(db, config, lambda a: a.list_keys(tenant))
    _out(
        [c.to_dict() for c in found],
        as_json,
        [
            "key_id",
            "kind",
            "role",
            "agent_id",
            "user_id",
            "created_at",
            "last_used_at",
            "revoked_at",
        ],
    )


@keys.command("revoke")
def keys_revoke(
    key_id: str, tenant: Tenant, db: Db = None, config: Config = None, as_json: Json = False
) -> None:
    """Revoke a key; it stops working on the next request, and so do its run tokens."""
    _with_access(db, config, lambda a: a.revoke_key(tenant, key_id))
    if as_json:
        _out({"revoked": key_id, "tenant_id": tenant}, True, [])
        return
    console.print(f"revoked {key_id}", markup=False)


@tokens.command("mint")
def tokens_mint(
    agent_id: Annotated[str, typer.Option(help="Agent the run acts as.")],
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            help="The service key's secret; other users of the machine can read a command "
            "line (ps): prefer QUIPU_API_KEY or --key-stdin.",
        ),
    ] = None,
    key_stdin: Annotated[
        bool,
        typer.Option("--key-stdin", help="Read the service key from the first line of stdin."),
    ] = False,
    user_id: Annotated[str | None, typer.Option(help="End user of the run.")] = None,
    ttl_seconds: Annotated[int, typer.Option(help="Lifetime.")] = 3600,
    db: Db = None,
    config: Config = None,
    as_json: Json = False,
) -> None:
    """Mint a run token bound to (agent_id, user_id) with a service key (from QUIPU_API_KEY,
    --key-stdin or --key)."""
    from quipu.core.records import Role

    secret_key = key_or_exit(key, key_stdin)

    def mint(a: Any) -> Any:
        who: Principal = a.authenticate(secret_key, surface="cli")
        if who.role is not Role.SERVICE:
            raise QuipuError("only service keys mint run tokens", code="forbidden")
        return a.mint_run_token(who, agent_id, user_id, timedelta(seconds=ttl_seconds))

    credential, secret = _with_access(db, config, mint)
    if as_json:
        _out({**credential.to_dict(), "token": secret}, True, [])
        return
    console.print(f"run token {credential.key_id}, expires {credential.expires_at}")
    console.print(f"token (shown once): [bold]{secret}[/bold]")
