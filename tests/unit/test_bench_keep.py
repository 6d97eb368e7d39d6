"""``--keep`` keeps a run's logs and configurations, not the brokers' records."""

from __future__ import annotations

from pathlib import Path

from bench.run import _drop_broker_data


def test_a_kept_run_loses_only_the_brokers_data_directories(tmp_path: Path) -> None:
    for node in (1, 2):
        data = tmp_path / "kafka" / f"node-{node}" / "data" / "topic-0"
        data.mkdir(parents=True)
        (data / "00000000000000000000.log").write_bytes(b"x" * 1024)
        (tmp_path / "kafka" / f"node-{node}" / "server.log").write_text("broker log")
    access = tmp_path / "full-scram" / "access"
    access.mkdir(parents=True)
    (access / "access.log").write_text("{}\n")

    _drop_broker_data(tmp_path)

    assert not list(tmp_path.glob("kafka/node-*/data"))
    assert (tmp_path / "kafka" / "node-1" / "server.log").read_text() == "broker log"
    assert (tmp_path / "kafka" / "node-2" / "server.log").is_file()
    assert (access / "access.log").is_file()
