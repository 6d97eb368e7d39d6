"""A topic-name guard: topics are created only under names that match a pattern.

Configured as one entry of the gateway's ``filters:`` list (docs/filters.md)::

    filters:
      - module: "examples.topic_guard:TopicNameGuard"
        config:
          pattern: "[a-z][a-z0-9-]*[.][a-z0-9.-]+"  # the whole name must match
          message: "topic names are <team>.<name>, in lower case"  # optional
          exempt_principals: ["User:platform-admin"]  # optional: may use any name

* **CreateTopics** naming any topic that does not match is refused with
  INVALID_TOPIC_EXCEPTION (17) and ``message`` plus the refused names on every topic
  of the request, as a broker refuses a request it cannot serve; the broker never
  sees it, so nothing is created, not even the good names of the same request
  (``validate_only`` requests get the same answer, so a dry run tells the truth).
* **Metadata** v4+ asking the broker to auto-create a topic that does not match has
  its ``allow_auto_topic_creation`` cleared (``call.evolve``); Metadata v0-3 has no
  such flag, so keep ``auto.create.topics.enable=false`` on the brokers as well.

Why the whole request: the filter API hands ``on_response`` no correlation id (nor the
request it answers), so a filter cannot drop the bad topics from what it forwards and
put their errors back into the matching response; ``reject`` is the honest answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.filters.api import BaseFilter, RequestCall

METADATA = 3
CREATE_TOPICS = 19
SETTINGS = frozenset({"pattern", "message", "exempt_principals"})
MAX_NAMES_SHOWN = 10  # a request may name thousands of topics; the message stays short


class TopicNameGuard(BaseFilter):
    """Refuses topic names that do not match ``pattern`` (``re.fullmatch``)."""

    name = "topic-name-guard"
    api_keys: frozenset[int] | None = frozenset({METADATA, CREATE_TOPICS})

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        settings = dict(config or {})
        unknown = sorted(set(settings) - SETTINGS)
        if unknown:
            raise ValueError(
                f"unknown setting {', '.join(unknown)} (expected {', '.join(sorted(SETTINGS))})"
            )
        self.pattern = _compile(settings.get("pattern"))
        message = settings.get("message", f"topic names must match {self.pattern.pattern!r}")
        if not isinstance(message, str) or not message.strip():
            raise ValueError("message must be a non-empty string")
        self.message = message
        exempt = settings.get("exempt_principals", [])
        if not isinstance(exempt, list) or not all(isinstance(p, str) for p in exempt):
            raise ValueError("exempt_principals must be a list of principals ('User:name')")
        self.exempt = frozenset(exempt)

    def allows(self, topic: str) -> bool:
        """Whether ``topic`` may be created."""
        return self.pattern.fullmatch(topic) is not None

    def on_request(self, call: RequestCall) -> None:
        if call.context.principal in self.exempt:
            return  # decided before anything is decoded
        if call.api_key == CREATE_TOPICS:
            self._guard_creation(call)
        elif call.api_key == METADATA:
            self._no_auto_creation(call)

    def _guard_creation(self, call: RequestCall) -> None:
        refused = list(dict.fromkeys(t.name for t in call.body.topics if not self.allows(t.name)))
        if not refused:
            return
        call.context.log.info(
            "CreateTopics refused: %d topic name(s) do not match",
            len(refused),
            extra={
                "event": "topic_name_refused",
                "principal": call.context.principal,
                "count": len(refused),
            },
        )
        message = f"{self.message} (refused: {_names(refused)})"
        call.reject(ErrorCode.invalid_topic_exception, message)

    def _no_auto_creation(self, call: RequestCall) -> None:
        body = call.body
        if not getattr(body, "allow_auto_topic_creation", False) or not body.topics:
            return  # v0-3 (no flag), the flag off, or all topics (nothing is created)
        names = (t.name for t in body.topics if t.name is not None)  # v10+: by id
        if not all(self.allows(name) for name in names):
            call.evolve(allow_auto_topic_creation=False)


def _compile(pattern: object) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise ValueError("pattern is required: a regular expression every topic name must match")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None


def _names(topics: list[str]) -> str:
    shown = ", ".join(repr(name) for name in topics[:MAX_NAMES_SHOWN])
    more = len(topics) - MAX_NAMES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown
