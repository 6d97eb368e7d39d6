"""``kgw serve --workers``: refusals before anything starts (a start failure inside the
workers: ``tests/integration/test_workers.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main

LISTENER = (
    "listeners: [{name: l, bootstrap_port: 30001, broker_port_base: 30010,"
    " advertised_host: localhost, max_node_id: 4}]\n"
)


def write(tmp_path: Path, *sections: str) -> str:
    config = tmp_path / "gw.yaml"
    config.write_text(
        "upstream: {bootstrap_servers: ['127.0.0.1:1']}\n" + LISTENER + "".join(sections)
    )
    return str(config)


def test_workers_must_be_a_count(tmp_path: Path) -> None:
    for bad in ("-1", "many", "257"):
        with pytest.raises(SystemExit) as exc:
            main(["serve", "--config", write(tmp_path), "--workers", bad])
        assert exc.value.code == 2


def test_explicit_workers_with_per_process_quotas_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, "quotas: {plans: {}}\n")
    assert main(["serve", "--config", config, "--workers", "2"]) == 2
    assert "quotas.redis_url" in capsys.readouterr().err
