"""Structured process logs (JSON lines in Pro), carrying dag/run/task ids when known."""

from __future__ import annotations

import json
import logging
import time

_CONTEXT_FIELDS = ("dag_id", "run_id", "task_id", "try_number", "ti_pk", "epoch")


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, and any ids passed in ``extra``."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)
