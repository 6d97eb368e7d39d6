"""The canary's bookkeeping: availability, latency, loss and duplicates (no I/O)."""

from __future__ import annotations

import math

import pytest

from gateway.monitoring.canary import CanaryBook, decode_value, encode_value, quantile


def test_values_round_trip_and_foreign_values_are_ignored() -> None:
    assert decode_value(encode_value("abc", 3, 42)) == ("abc", 3, 42)
    for bad in (None, b"", b"hello", b"kgw-canary/1 x y z", b"kgw-canary/1 a 1"):
        assert decode_value(bad) is None


def test_sequences_latency_and_availability() -> None:
    book = CanaryBook(window_s=60, lost_after_s=30, run="r")
    assert math.isnan(book.stats(0.0).availability)
    for partition in (0, 1):
        seq, value = book.next_record(partition)
        assert seq == 0
        book.produced_ok(partition, seq, sent_at=0.0, now=0.01)
        book.fetch_ok(0.1)
        book.received(value, now=0.1 * (partition + 1))
    book.produce_failed(0.2)
    book.fetch_failed(0.2)
    stats = book.stats(0.3)
    assert (stats.produced, stats.fetched, stats.lost, stats.duplicated, stats.pending) == (
        2,
        2,
        0,
        0,
        0,
    )
    assert stats.availability == pytest.approx(4 / 6)
    assert stats.latency_quantiles[0.5] == pytest.approx(0.1)
    assert stats.latency_quantiles[1.0] == pytest.approx(0.2)
    assert book.next_record(0)[0] == 1


def test_duplicates_and_other_runs() -> None:
    book = CanaryBook(run="mine")
    seq, value = book.next_record(0)
    book.produced_ok(0, seq, 0.0, 0.0)
    book.received(value, 1.0)
    book.received(value, 2.0)
    book.received(encode_value("theirs", 0, 0), 2.0)
    stats = book.stats(2.0)
    assert (stats.fetched, stats.duplicated) == (1, 1)


def test_acknowledged_records_not_fetched_in_time_are_lost() -> None:
    book = CanaryBook(lost_after_s=5, run="r")
    for _ in range(3):
        seq, _value = book.next_record(0)
        book.produced_ok(0, seq, 0.0, 0.0)
    _, late_value = book.next_record(0)  # produce failed: never expected
    book.produce_failed(0.0)
    assert book.expire(4.0) == 0
    assert book.expire(6.0) == 3
    book.received(late_value, 7.0)  # a record whose produce failed is not a duplicate
    stats = book.stats(7.0)
    assert (stats.lost, stats.pending, stats.duplicated) == (3, 0, 0)


def test_window_forgets_old_attempts() -> None:
    book = CanaryBook(window_s=10, run="r")
    book.produce_failed(0.0)
    book.fetch_ok(20.0)
    assert book.stats(20.0).availability == 1.0


def test_quantile() -> None:
    assert math.isnan(quantile([], 0.5))
    assert quantile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.99) == 4.0
