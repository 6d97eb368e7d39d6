"""Topic configs read as Kafka 4.1's broker reads them: the key table, types, validators.

The accepted/refused vectors below were checked against Kafka 4.1.2's own
``ConfigDef.parseType`` and validators (tests/integration/test_kafkaconfig_oracle.py
runs that comparison against the jars)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.kafkaconfig import (
    INVALID_CONFIG,
    TOPIC_CONFIGS,
    ConfigType,
    InvalidConfig,
    parse_topic_value,
    read_changes,
)
from gateway.kafkaconfig.topic import APPEND, DELETE, SET, SUBTRACT

ACCEPTED = [
    ("retention.ms", "\x01-1", -1),  # the broker's trim drops the control character
    ("retention.ms", "\t-1 ", -1),
    ("retention.ms", "+5", 5),
    ("retention.ms", "\u0663", 3),  # ARABIC-INDIC DIGIT THREE
    ("retention.ms", "\uff11\uff12", 12),  # fullwidth 1 2
    ("retention.bytes", "-9223372036854775808", -(2**63)),
    ("segment.bytes", "1048576", 1048576),
    ("compression.gzip.level", "-1", -1),
    ("cleanup.policy", "", ()),
    ("cleanup.policy", " compact , delete ", ("compact", "delete")),
    ("cleanup.policy", "compact,compact", ("compact", "compact")),
    ("compression.type", " gzip", "gzip"),
    ("preallocate", "TRUE", True),
    ("preallocate", "fal\u017fe", False),  # long s: upper case S
    ("min.cleanable.dirty.ratio", "0x1p-1", 0.5),
    ("min.cleanable.dirty.ratio", ".5f", 0.5),
    ("leader.replication.throttled.replicas", "* ", ("*",)),
    ("leader.replication.throttled.replicas", "1:2, 3:4", ("1:2", "3:4")),
    ("leader.replication.throttled.replicas", "1:2,,3:4", ("1:2", "", "3:4")),
]
REFUSED = [
    ("retention.ms", "1_000", "Not a number of type LONG"),
    ("retention.ms", "1e3", "not a number of type LONG"),
    ("retention.ms", "", "not a number"),
    ("retention.ms", "- 1", "not a number"),
    ("retention.ms", "0x10", "not a number"),
    ("retention.ms", "\U0001d7cf", "not a number"),  # beyond the BMP
    ("retention.ms", "9223372036854775808", "out of the range of type LONG"),
    ("retention.ms", "-2", "at least -1"),
    ("retention.ms", "-9223372036854775808", "at least -1"),
    ("segment.bytes", "2147483648", "range of type INT"),
    ("segment.bytes", "1048575", "at least 1048576"),
    ("compression.gzip.level", "0", "between 1 and 9, or -1"),
    ("compression.gzip.level", "10", "between 1 and 9, or -1"),
    ("cleanup.policy", "Compact", "not one of"),
    ("cleanup.policy", ",", "not one of"),
    ("compression.type", "GZIP", "must be one of"),
    ("preallocate", "tru", "either true or false"),
    ("min.cleanable.dirty.ratio", "\u0660.5", "DOUBLE"),
    ("min.cleanable.dirty.ratio", "Infinityd", "DOUBLE"),
    ("min.cleanable.dirty.ratio", "1.5", "no more than 1"),
    ("leader.replication.throttled.replicas", "1:2,*", "[partitionId]:[brokerId]"),
    ("leader.replication.throttled.replicas", "\u0661:2", "[partitionId]:[brokerId]"),
]


@pytest.mark.parametrize(("name", "value", "parsed"), ACCEPTED)
def test_values_the_broker_accepts(name: str, value: str, parsed: object) -> None:
    assert parse_topic_value(name, value) == parsed


@pytest.mark.parametrize(("name", "value", "words"), REFUSED)
def test_values_the_broker_refuses_are_invalid_config(name: str, value: str, words: str) -> None:
    with pytest.raises(InvalidConfig) as caught:
        parse_topic_value(name, value)
    message = str(caught.value)
    assert caught.value.error_code == INVALID_CONFIG == 40
    assert words.lower() in message.lower() and name in message


def test_nan_passes_a_range_as_in_kafka() -> None:
    assert math.isnan(parse_topic_value("min.cleanable.dirty.ratio", "NaN"))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["retention.mss", "internal.segment.bytes", "RETENTION.MS",
                                  " retention.ms", "log.retention.ms", ""])  # fmt: skip
def test_unknown_keys_are_refused_by_name(name: str) -> None:
    with pytest.raises(InvalidConfig, match="Unknown topic config name"):
        parse_topic_value(name, "1")


def test_null_values_are_refused() -> None:
    with pytest.raises(InvalidConfig, match="Null value not supported for topic configs"):
        parse_topic_value("retention.ms", None)


def test_messages_escape_and_cut_the_tenants_text() -> None:
    with pytest.raises(InvalidConfig) as caught:
        parse_topic_value("retention.ms", "\n\x1b[31m" + "9" * 200 + "x")
    message = str(caught.value)
    assert "\x1b" not in message and "\\x1b" in message and "..." in message
    assert len(message) < 200
    with pytest.raises(InvalidConfig) as unknown:
        parse_topic_value("evil\nkey", "1")
    assert "\n" not in str(unknown.value)


def test_the_table_is_kafka_4_1s_topic_keys() -> None:
    assert len(TOPIC_CONFIGS) == 33
    kinds = {name: spec.type for name, spec in TOPIC_CONFIGS.items()}
    assert kinds["retention.ms"] is kinds["retention.bytes"] is ConfigType.LONG
    assert kinds["segment.bytes"] is ConfigType.INT and kinds["cleanup.policy"] is ConfigType.LIST
    assert "message.format.version" not in kinds  # removed in Kafka 4.0


@given(st.sampled_from(sorted(TOPIC_CONFIGS)), st.text(max_size=20))
def test_any_text_is_read_or_refused_never_anything_else(name: str, value: str) -> None:
    try:
        parse_topic_value(name, value)
    except InvalidConfig as exc:
        assert "\n" not in str(exc)


def test_read_changes_parses_sets_and_notes_deletes_and_list_edits() -> None:
    changes = read_changes(
        [("retention.ms", " 3600000", SET), ("segment.ms", None, DELETE),
         ("cleanup.policy", "compact", APPEND), ("leader.replication.throttled.replicas",
                                                 "1:2", SUBTRACT)]
    )  # fmt: skip
    assert changes.values == {"retention.ms": 3_600_000}
    assert changes.deleted == {"segment.ms"}
    assert changes.edited == {"cleanup.policy", "leader.replication.throttled.replicas"}


@pytest.mark.parametrize(
    ("configs", "words"),
    [
        ([("retention.ms", "1", SET), ("retention.ms", "-1", SET)], "duplicate config key"),
        ([("retention.ms", "1", SET), ("retention.ms", None, DELETE)], "duplicate config key"),
        ([("retention.ms", "1", APPEND)], "Can't APPEND to key retention.ms"),
        ([("retention.ms", "1", SUBTRACT)], "because its type is not LIST"),
        ([("cleanup.policy", None, APPEND)], "Null value"),
        ([("no.such.key", None, DELETE)], "Unknown topic config name"),
        ([("retention.ms", "1", 7)], "unknown config operation 7"),
        ([("retention.ms", "\x01-1x", SET)], "retention.ms"),
    ],
)
def test_read_changes_refuses_what_it_cannot_read(
    configs: list[tuple[str, str | None, int]], words: str
) -> None:
    with pytest.raises(InvalidConfig, match=words.replace(".", r"\.")):
        read_changes(configs)
