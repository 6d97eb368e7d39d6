"""``bench.hotpath --cold``: the session's per-exchange CPU, back to back and with the
caches evicted before each exchange (a measurement tool; no timing is asserted)."""

from __future__ import annotations

import logging

import pytest

from bench import hotpath


@pytest.mark.parametrize("full", [False, True])
def test_session_cold_us_measures_answered_exchanges(full: bool) -> None:
    logging.disable(logging.CRITICAL)
    try:
        hot, cold = hotpath.session_cold_us(full, 3)  # raises if a request went unanswered
    finally:
        logging.disable(logging.NOTSET)
    assert hot > 0 and cold > 0


def test_main_prints_the_cold_rows(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[bool, int]] = []

    def fake(full: bool, count: int) -> tuple[float, float]:
        calls.append((full, count))
        return (30.0, 300.0) if full else (10.0, 100.0)

    monkeypatch.setattr(hotpath, "session_cold_us", fake)
    monkeypatch.setattr(hotpath, "best", lambda _repeat, _run: 1.0)  # skip the CPU loops
    assert hotpath.main(["--repeat", "1", "--cold", "5"]) == 0
    out = capsys.readouterr().out
    assert calls == [(False, 5), (True, 5)]
    assert "full stack adds, hot" in out and "20.000 µs" in out
    assert "full stack adds, cold" in out and "200.000 µs" in out
