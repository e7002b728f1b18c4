"""Logging of the served app: uvicorn's own configuration, with two changes.

- The access log never carries a query string (``?reason=…`` would put free text a caller
  wrote into every log line; issue 20 defect 4): a query is shown as ``?…``.
- The root logger gets a plain handler on stderr before anything else configures it, so a
  library that calls ``logging.basicConfig`` with a Rich handler (the MCP SDK does) adds nothing,
  and an exception is never rendered by Rich on the event loop (issue 20 defect 3).
"""

from __future__ import annotations

import copy
import logging
import logging.config
from typing import Any

from uvicorn.config import LOGGING_CONFIG


class WithoutQuery(logging.Filter):
    """Drop the query string from uvicorn's access records (the path stays)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            path, mark, _ = args[2].partition("?")
            record.args = (*args[:2], path + ("?…" if mark else ""), *args[3:])
        return True


def log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging configuration at ``level``, with the changes above."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"without_query": {"()": f"{__name__}.WithoutQuery"}}
    config["handlers"]["access"]["filters"] = ["without_query"]
    config["root"] = {"handlers": ["default"], "level": "WARNING"}
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        config["loggers"][name]["level"] = level.upper()
    config["loggers"]["quipu"] = {"level": level.upper()}
    return config


def configure_logging(level: str) -> dict[str, Any]:
    """Apply :func:`log_config` now (before the app is built) and return it for uvicorn."""
    config = log_config(level)
    logging.config.dictConfig(config)
    return config
