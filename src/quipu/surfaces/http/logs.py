"""Logging of the served app: uvicorn's own configuration, with three changes.

- The access log never carries a query string (``?reason=…`` would put free text a caller
  wrote into every log line; issue 20 defect 4): a query is shown as ``?…``.
- The root logger gets a plain handler on stderr before anything else configures it, so a
  library that calls ``logging.basicConfig`` with a Rich handler (the MCP SDK does) adds nothing,
  and an exception is never rendered by Rich on the event loop (issue 20 defect 3).
- With ``log_format = "json"`` (the default) every record is one JSON object per line
  (:class:`JsonLines`), and the per-request line is :mod:`quipu.surfaces.http.observe`'s
  (request id, key id, route template, status, duration), which replaces uvicorn's access line.
"""

from __future__ import annotations

import copy
import json
import logging
import logging.config
from datetime import UTC, datetime
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


class JsonLines(logging.Formatter):
    """One JSON object per record: time, level, logger, message, and the record's ``request``
    fields when it has them (the request line). The message is the logger's own text; the
    request line's fields are fixed names, never a body or a query string."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "request", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info and record.exc_info[0] is not None:
            line["error"] = record.exc_info[0].__name__
        return json.dumps(line, ensure_ascii=False, default=str)


def log_config(level: str, fmt: str = "json") -> dict[str, Any]:
    """uvicorn's logging configuration at ``level``, with the changes above."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"without_query": {"()": f"{__name__}.WithoutQuery"}}
    config["handlers"]["access"]["filters"] = ["without_query"]
    config["root"] = {"handlers": ["default"], "level": "WARNING"}
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        config["loggers"][name]["level"] = level.upper()
    config["loggers"]["quipu"] = {"level": level.upper()}
    # The request line: its own handler (stderr), so it is not repeated by the root's.
    config["handlers"]["request"] = {
        "class": "logging.StreamHandler",
        "formatter": "default",
        "stream": "ext://sys.stderr",
    }
    config["loggers"]["quipu.request"] = {
        "handlers": ["request"],
        "level": level.upper(),
        "propagate": False,
    }
    if fmt == "json":
        config["formatters"]["json"] = {"()": f"{__name__}.JsonLines"}
        for handler in config["handlers"].values():
            handler["formatter"] = "json"
        config["loggers"]["uvicorn.access"]["level"] = "WARNING"  # the request line replaces it
    return config


def configure_logging(level: str, fmt: str = "json") -> dict[str, Any]:
    """Apply :func:`log_config` now (before the app is built) and return it for uvicorn."""
    config = log_config(level, fmt)
    logging.config.dictConfig(config)
    return config
