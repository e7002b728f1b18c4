"""JSON-RPC errors for MCP messages the transport refuses (issue 20 defect 13).

A message nested deeper than :data:`MAX_JSON_DEPTH` or holding a lone surrogate or a NUL in
any string is answered with a JSON-RPC error naming the field, carrying the request's id when
it can be read, before the MCP SDK parses it: the SDK's parser refuses such a message without
an id, and over stdio it answered nothing at all. Over stdio, any other line the SDK cannot
read is answered too (parse error or invalid request), never dropped in silence.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from quipu.surfaces.http.inbound import (
    MAX_JSON_DEPTH,
    UNPARSED,
    Refusal,
    parse_json,
    screen_value,
)


def refusal_error(raw: bytes | str) -> JSONRPCError | None:
    """The JSON-RPC error for a message the transport refuses; ``None`` to let it through."""
    document = parse_json(raw, root="", max_depth=MAX_JSON_DEPTH)
    if isinstance(document, Refusal):
        return _error(None, document)
    if document is UNPARSED:
        return None
    refusal = screen_value(document, root="", max_depth=MAX_JSON_DEPTH)
    return None if refusal is None else _error(request_id(document), refusal)


def line_error(line: str) -> JSONRPCError | None:
    """For one stdio line: the error to answer with instead of passing it to the SDK, or
    ``None`` when the SDK can read it."""
    refused = refusal_error(line)
    if refused is not None:
        return refused
    try:
        jsonrpc_message_adapter.validate_json(line, by_name=False)
    except (ValidationError, ValueError):
        pass
    else:
        return None
    try:
        document = json.loads(line)
    except (ValueError, RecursionError):
        return JSONRPCError(
            jsonrpc="2.0", id=None, error=ErrorData(code=PARSE_ERROR, message="Parse error")
        )
    return JSONRPCError(
        jsonrpc="2.0",
        id=request_id(document),
        error=ErrorData(code=INVALID_REQUEST, message="Invalid request: not a JSON-RPC message"),
    )


def request_id(document: object) -> int | str | None:
    """The id of a request, when it has a usable one."""
    if not isinstance(document, dict):
        return None
    found = document.get("id")
    if isinstance(found, bool) or not isinstance(found, int | str):
        return None
    if isinstance(found, str) and screen_value(found, root="id") is not None:
        return None
    return found


def _error(request: int | str | None, refusal: Refusal) -> JSONRPCError:
    code = INVALID_PARAMS if refusal.field.startswith("params") else INVALID_REQUEST
    data: dict[str, Any] = {"code": refusal.code, "field": refusal.field}
    return JSONRPCError(
        jsonrpc="2.0",
        id=request,
        error=ErrorData(code=code, message=f"{refusal.code}: {refusal.message}", data=data),
    )
