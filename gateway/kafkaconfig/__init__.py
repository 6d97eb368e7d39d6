"""Kafka config values read as the broker reads them (Java's parsing, Kafka's topic table)."""

from __future__ import annotations

from .topic import (
    INVALID_CONFIG,
    TOPIC_CONFIGS,
    ConfigType,
    InvalidConfig,
    TopicChanges,
    TopicConfig,
    Value,
    parse_topic_value,
    read_changes,
)

__all__ = [
    "INVALID_CONFIG",
    "TOPIC_CONFIGS",
    "ConfigType",
    "InvalidConfig",
    "TopicChanges",
    "TopicConfig",
    "Value",
    "parse_topic_value",
    "read_changes",
]
