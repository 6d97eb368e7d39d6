"""Structured logging with fixed keys.

Every record is one JSON object: ``ts``, ``level``, ``logger``, ``event``,
``msg`` and whichever of the known context keys the call passed in ``extra``.
Only those keys are emitted, so nothing else (a secret held in some object)
can reach a log line by accident.
"""

from __future__ import annotations

import json
import logging
import sys
import time

CONTEXT_KEYS = (
    "conn",
    "listener",
    "peer",
    "upstream",
    "node_id",
    "side",
    "reason",
    "api",
    "api_version",
    "port",
    "host",
    "count",
    "seconds",
    "path",
    "principal",
    "tls_version",
    "cipher",
    "sni",
    "subject",
    "serial",
    "issuer",
    "fingerprint",
    "outcome",
    "mechanism",
    "filter",
    "api_key",
    "worker",
)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "event": getattr(record, "event", "message"),
            "msg": record.getMessage(),
        }
        for key in CONTEXT_KEYS:
            value = record.__dict__.get(key)
            if value is not None:
                entry[key] = value
        if record.exc_info and record.levelno >= logging.ERROR:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        context = " ".join(
            f"{key}={record.__dict__[key]}"
            for key in CONTEXT_KEYS
            if record.__dict__.get(key) is not None
        )
        event = getattr(record, "event", "message")
        return (
            f"{record.levelname:<7} {record.name} {event}: {record.getMessage()} {context}".rstrip()
        )


def configure(level: str = "INFO", fmt: str = "json") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # casbin writes every rule of a policy it loads at INFO: the gateway logs its own
    # policy_loaded line instead; casbin's warnings and errors still come through
    logging.getLogger("casbin").setLevel(max(logging.WARNING, root.level))
