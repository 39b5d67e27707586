"""Logging setup: human-readable text or one JSON object per line.

Every line about an object carries its reference (``object`` field in JSON, a ``[ns/name]``
prefix in text): callers pass ``extra={"object": "<kind> <ns>/<name>"}`` or use
:func:`for_object`.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import MutableMapping
from typing import Any

from .conditions import format_time


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        from datetime import UTC, datetime

        entry: dict[str, Any] = {
            "ts": format_time(datetime.fromtimestamp(record.created, UTC)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        obj = getattr(record, "object", None)
        if obj:
            entry["object"] = obj
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        obj = getattr(record, "object", None)
        return f"{text} [{obj}]" if obj else text


def setup(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # kopf logs every handler call at INFO; keep its noise below ours.
    logging.getLogger("kopf").setLevel(max(logging.getLevelName(level), logging.WARNING))
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


class ObjectLogger(logging.LoggerAdapter[logging.Logger]):
    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs.setdefault("extra", {})["object"] = self.extra["object"] if self.extra else None
        return msg, kwargs


def for_object(logger: logging.Logger, ref: str) -> ObjectLogger:
    return ObjectLogger(logger, {"object": ref})
