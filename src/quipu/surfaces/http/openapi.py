"""The OpenAPI document declares how to authenticate (API-2, issue 27): a ``bearer`` HTTP
security scheme, required by every ``/v1`` operation, so a generated client sends
``Authorization: Bearer <api key or run token>``. (In local mode the server ignores it.)"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

SCHEME = "bearer"


def declare_bearer(app: FastAPI) -> None:
    """Wrap ``app.openapi`` so the document it builds (once) carries the scheme."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = build()
        components = document.setdefault("components", {})
        components.setdefault("securitySchemes", {})[SCHEME] = {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key (qk_...) or a run token (qt_...).",
        }
        for path, operations in document.get("paths", {}).items():
            if path == "/v1" or path.startswith("/v1/"):
                for operation in operations.values():
                    operation.setdefault("security", [{SCHEME: []}])
        app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]
