"""Loopback port blocks for test gateways: blocks handed out in one process never
overlap, though none of them is listening yet (two listeners of one gateway pick
theirs before either binds; broker ports are bound even later)."""

from __future__ import annotations

import pytest

from gateway.devstack import gateway_proc


def test_blocks_promised_in_a_row_never_overlap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway_proc, "_ephemeral_start", lambda: 20000)  # a narrow range
    monkeypatch.setattr(gateway_proc, "_ports_free", lambda host, ports: True)  # all "free"
    monkeypatch.setattr(gateway_proc, "_PROMISED", type(gateway_proc._PROMISED)(maxlen=64))
    blocks = []
    for _ in range(8):
        bootstrap, base = gateway_proc.pick_ports(span=5)
        blocks.append({bootstrap, *range(base, base + 5)})
    for i, block in enumerate(blocks):
        for other in blocks[i + 1 :]:
            assert not block & other
