"""Kafka 4.1's topic-level configs, and a tenant's value read the way the broker reads it.

``TOPIC_CONFIGS`` is the broker's table (``LogConfig``: every key a client may set
on a topic, its ``ConfigDef`` type and validator), written out by hand from
Kafka 4.1.2. :func:`parse_topic_value` trims and parses a value as
``ConfigDef.parseType`` does and then applies the validator, so a limit is
checked on the number the broker will store (``"\\x01-1"`` is -1 to the broker,
so it is -1 here). :func:`read_changes` reads one topic's configs from a request
(CreateTopics, AlterConfigs, IncrementalAlterConfigs with its operations). An
unknown key, a duplicate, a null or any value the broker would refuse raises
:class:`InvalidConfig`, answered with INVALID_CONFIG (40). No I/O.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .javaparse import (
    INT_BITS,
    JavaParseError,
    java_trim,
    parse_boolean,
    parse_double,
    parse_integer,
    parse_list,
)

INVALID_CONFIG = 40
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs config_operation
_SHOWN = 64  # at most this many chars of a tenant's text go into a message
_REPLICA = re.compile(r"(?:[0-9]+:[0-9]+)?")

Value = bool | int | float | str | tuple[str, ...]
Check = Callable[[Value], str | None]
"""A validator: None when the parsed value is valid, else the reason."""


class ConfigType(enum.Enum):
    """``ConfigDef.Type``."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    SHORT = "SHORT"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class InvalidConfig(ValueError):
    """A config the broker would refuse, or the gateway cannot read (INVALID_CONFIG)."""

    error_code = INVALID_CONFIG


@dataclass(frozen=True, slots=True)
class TopicConfig:
    type: ConfigType
    check: Check | None = None


def shown(text: str, secret: bool = False) -> str:
    """A tenant's text fit for a message or a log line: escaped, cut short."""
    if secret:
        return "[hidden]"
    escaped = text[:_SHOWN].encode("unicode_escape").decode("ascii").replace("'", "\\'")
    return f"'{escaped}{'...' if len(text) > _SHOWN else ''}'"


def at_least(low: float) -> Check:
    return between(low, None)


def between(low: float | None, high: float | None) -> Check:
    """``ConfigDef.Range``: compared as doubles, so NaN passes, as in Kafka."""

    def check(value: Value) -> str | None:
        number = float(value) if isinstance(value, int | float) else None
        if number is None:
            return "not a number"
        if low is not None and number < low:
            return f"Value must be at least {_bound(low)}"
        if high is not None and number > high:
            return f"Value must be no more than {_bound(high)}"
        return None

    return check


def _bound(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def one_of(*options: str) -> Check:
    """``ConfigDef.ValidString``: exactly one of ``options`` (case matters)."""
    return lambda value: None if value in options else f"String must be one of: {options}"


def all_of(*options: str) -> Check:
    """``ConfigDef.ValidList``: every item one of ``options``; empty and repeats pass."""

    def check(value: Value) -> str | None:
        items = value if isinstance(value, tuple) else (value,)
        bad = [item for item in items if item not in options]
        return f"Invalid value {shown(str(bad[0]))}: not one of {options}" if bad else None

    return check


def _gzip_level(value: Value) -> str | None:
    ok = isinstance(value, int) and (value == -1 or 1 <= value <= 9)
    return None if ok else "Value must be between 1 and 9, or -1"


def _throttled_replicas(value: Value) -> str | None:
    """``ThrottledReplicaListValidator``: ``*`` or ``partition:broker`` items."""
    items = value if isinstance(value, tuple) else ()
    if "".join(items) == "*" or all(_REPLICA.fullmatch(java_trim(i)) for i in items):
        return None
    return "must be * or a list of [partitionId]:[brokerId]"


_T = ConfigType
TOPIC_CONFIGS: Mapping[str, TopicConfig] = {
    "cleanup.policy": TopicConfig(_T.LIST, all_of("compact", "delete")),
    "compression.gzip.level": TopicConfig(_T.INT, _gzip_level),
    "compression.lz4.level": TopicConfig(_T.INT, between(1, 17)),
    "compression.type": TopicConfig(
        _T.STRING, one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
    ),
    "compression.zstd.level": TopicConfig(_T.INT, between(-131072, 22)),
    "delete.retention.ms": TopicConfig(_T.LONG, at_least(0)),
    "file.delete.delay.ms": TopicConfig(_T.LONG, at_least(0)),
    "flush.messages": TopicConfig(_T.LONG, at_least(1)),
    "flush.ms": TopicConfig(_T.LONG, at_least(0)),
    "follower.replication.throttled.replicas": TopicConfig(_T.LIST, _throttled_replicas),
    "index.interval.bytes": TopicConfig(_T.INT, at_least(0)),
    "leader.replication.throttled.replicas": TopicConfig(_T.LIST, _throttled_replicas),
    "local.retention.bytes": TopicConfig(_T.LONG, at_least(-2)),
    "local.retention.ms": TopicConfig(_T.LONG, at_least(-2)),
    "max.compaction.lag.ms": TopicConfig(_T.LONG, at_least(1)),
    "max.message.bytes": TopicConfig(_T.INT, at_least(0)),
    "message.timestamp.after.max.ms": TopicConfig(_T.LONG, at_least(0)),
    "message.timestamp.before.max.ms": TopicConfig(_T.LONG, at_least(0)),
    "message.timestamp.type": TopicConfig(_T.STRING, one_of("CreateTime", "LogAppendTime")),
    "min.cleanable.dirty.ratio": TopicConfig(_T.DOUBLE, between(0, 1)),
    "min.compaction.lag.ms": TopicConfig(_T.LONG, at_least(0)),
    "min.insync.replicas": TopicConfig(_T.INT, at_least(1)),
    "preallocate": TopicConfig(_T.BOOLEAN),
    "remote.log.copy.disable": TopicConfig(_T.BOOLEAN),
    "remote.log.delete.on.disable": TopicConfig(_T.BOOLEAN),
    "remote.storage.enable": TopicConfig(_T.BOOLEAN),
    "retention.bytes": TopicConfig(_T.LONG),
    "retention.ms": TopicConfig(_T.LONG, at_least(-1)),
    "segment.bytes": TopicConfig(_T.INT, at_least(1024 * 1024)),
    "segment.index.bytes": TopicConfig(_T.INT, at_least(4)),
    "segment.jitter.ms": TopicConfig(_T.LONG, at_least(0)),
    "segment.ms": TopicConfig(_T.LONG, at_least(1)),
    "unclean.leader.election.enable": TopicConfig(_T.BOOLEAN),
}
"""Kafka 4.1.2's ``LogConfig`` keys a client may set (the internal ones are refused)."""


def parse_type(kind: ConfigType, value: str) -> Value:
    """``ConfigDef.parseType`` of a string: trim, then the type's own parse."""
    text = java_trim(value)
    if kind is ConfigType.LONG:
        return parse_integer(text)
    if kind is ConfigType.INT:
        return parse_integer(text, INT_BITS)
    if kind is ConfigType.SHORT:
        return parse_integer(text, 16)
    if kind is ConfigType.DOUBLE:
        return parse_double(text)
    if kind is ConfigType.BOOLEAN:
        return parse_boolean(text)
    if kind is ConfigType.LIST:
        return parse_list(text)
    return text  # STRING, CLASS (the broker loads the class), PASSWORD


def parse_topic_value(name: str, value: str | None) -> Value:
    """The value the broker stores for topic config ``name``; InvalidConfig if none."""
    spec = TOPIC_CONFIGS.get(name)
    if spec is None:
        raise InvalidConfig(f"Unknown topic config name: {shown(name)}")
    if value is None:
        raise InvalidConfig(f"Null value not supported for topic configs: {name}")
    secret = spec.type is ConfigType.PASSWORD
    try:
        parsed = parse_type(spec.type, value)
    except JavaParseError as exc:
        raise InvalidConfig(_invalid(name, value, str(exc), secret)) from None
    reason = spec.check(parsed) if spec.check is not None else None
    if reason is not None:
        raise InvalidConfig(_invalid(name, value, reason, secret))
    return parsed


def _invalid(name: str, value: str, reason: str, secret: bool) -> str:
    return f"Invalid value {shown(value, secret)} for configuration {name}: {reason}"


@dataclass(frozen=True, slots=True)
class TopicChanges:
    """What one request does to one topic's configs, as the broker will read it."""

    values: Mapping[str, Value]  # SET (and CreateTopics / AlterConfigs): the parsed values
    deleted: frozenset[str] = frozenset()  # DELETE: back to the broker's default
    edited: frozenset[str] = frozenset()  # APPEND / SUBTRACT on a LIST key


def read_changes(configs: Iterable[tuple[str, str | None, int]]) -> TopicChanges:
    """``(name, value, operation)`` of one topic resource; raises InvalidConfig.

    Each key once; a known key; SET values parsed and validated; DELETE ignores the
    value; APPEND / SUBTRACT only on LIST keys (as the broker), with a value."""
    values: dict[str, Value] = {}
    deleted: set[str] = set()
    edited: set[str] = set()
    seen: set[str] = set()
    for name, value, operation in configs:
        if name in seen:
            raise InvalidConfig(f"duplicate config key {shown(name)}")
        seen.add(name)
        if operation == SET:
            values[name] = parse_topic_value(name, value)
        elif operation in (DELETE, APPEND, SUBTRACT):
            spec = TOPIC_CONFIGS.get(name)
            if spec is None:
                raise InvalidConfig(f"Unknown topic config name: {shown(name)}")
            if operation == DELETE:
                deleted.add(name)
                continue
            if spec.type is not ConfigType.LIST:
                raise InvalidConfig(f"Can't {_OPERATIONS[operation]} to key {name} "
                                    "because its type is not LIST.")  # fmt: skip
            if value is None:
                raise InvalidConfig(f"Null value not supported for topic configs: {name}")
            edited.add(name)
        else:
            raise InvalidConfig(f"unknown config operation {operation} for {shown(name)}")
    return TopicChanges(values, frozenset(deleted), frozenset(edited))


_OPERATIONS = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
