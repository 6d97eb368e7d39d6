"""Alert payloads, the follow settings, the emitted-id set, the source's versions (pure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.analytics import kinds
from gateway.analytics.alerts import alertmanager_payload, webhook_payload
from gateway.analytics.findings import Finding
from gateway.analytics.follow import Emitted
from gateway.analytics.kafka_source import _stem, candidates, source_note, spark_coordinates
from gateway.analytics.settings import SettingsError, load_follow, load_policy

F = Finding(
    kinds.AUTH_BURST_ADDRESS, "high", 1.5, "10.0.0.9", 1_700_000_000.0, 1_700_000_060.0,
    "15 failed logins", {"failures": 15}, client_host="10.0.0.9", tenant="a",
)  # fmt: skip


def test_alertmanager_payload() -> None:
    [alert] = alertmanager_payload([F], resolve_after_s=3600)
    assert alert["labels"] == {
        "alertname": f"kgw_{kinds.AUTH_BURST_ADDRESS}", "detector": kinds.AUTH_BURST_ADDRESS,
        "severity": "high", "entity": "10.0.0.9", "finding_id": F.id,
        "client_host": "10.0.0.9", "tenant": "a",
    }  # fmt: skip
    assert alert["startsAt"] == "2023-11-14T22:13:20.000Z"
    assert alert["endsAt"] == "2023-11-14T23:14:20.000Z"
    assert json.loads(alert["annotations"]["evidence"]) == {"failures": 15}


def test_webhook_payload_is_the_findings_json() -> None:
    body = webhook_payload([F])
    assert body["source"] == "kgw-analyze" and body["findings"] == [F.to_json()]


def test_follow_config_is_validated(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(
        "source: {bootstrap_servers: 'h:9092', topic: kgw.access}\n"
        "checkpoint_dir: /tmp/c\nout: /tmp/o\n"
        "alerts: {webhook_url: 'http://127.0.0.1:9/x'}\n"
    )
    config = load_follow(path)
    assert config.trigger_s == 10 and config.response is None
    path.write_text("source: {bootstrap_servers: 'h', topic: t}\ncheckpoint_dir: c\nout: o\n"
                    "trigger_s: 120\n")  # fmt: skip
    with pytest.raises(SettingsError, match="trigger_s"):
        load_follow(path)
    path.write_text("source: {bootstrap_servers: h, topic: t}\ncheckpoint_dir: c\nout: o\nx: 1\n")
    with pytest.raises(SettingsError):
        load_follow(path)


def test_policy_is_validated(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("rules: [{detector: nope, action: block_address}]\n")
    with pytest.raises(SettingsError, match="unknown detector"):
        load_policy(path)
    path.write_text(f"rules: [{{detector: {kinds.SPRAYING}, action: revoke_key, expire_s: 5}}]\n")
    with pytest.raises(SettingsError, match="expire_s"):
        load_policy(path)
    path.write_text(f"rules: [{{detector: {kinds.SPRAYING}, action: block_address}}]\n")
    assert load_policy(path).rules[0].min_severity == "high"


def test_emitted_ids_survive_a_restart_and_a_torn_line(tmp_path: Path) -> None:
    emitted = Emitted(tmp_path / "emitted.jsonl")
    assert emitted.fresh([F]) == [F]
    emitted.add([F])
    with (tmp_path / "emitted.jsonl").open("a") as fh:
        fh.write('{"id": "abc", "end')  # a crash mid-line
    again = Emitted(tmp_path / "emitted.jsonl")
    again.load()
    assert again.fresh([F]) == []
    again.forget_before(F.end + 1)
    assert again.ids == {}


def test_emitted_ids_from_the_findings_file_keep_their_end(tmp_path: Path) -> None:
    findings = tmp_path / "findings.jsonl"
    findings.write_text(json.dumps({**F.to_json(), "batch": 3}) + "\n")
    emitted = Emitted(tmp_path / "emitted.jsonl")
    emitted.add([F])
    again = Emitted(tmp_path / "emitted.jsonl")
    again.load(also=findings)
    again.forget_before(F.end - 3600)  # the retention horizon, before the finding's end
    assert again.fresh([F]) == []
    assert again.ids[F.id] == F.end


def test_source_versions_and_jar_names() -> None:
    assert candidates("4.3.0") == ["4.3.0", "4.2.0"]
    assert candidates("4.1.2") == ["4.1.2", "4.1.1", "4.1.0", "4.0.0"]
    assert _stem("kafka-clients-3.9.2.jar") == "kafka-clients"
    assert _stem("spark-sql-kafka-0-10_2.13-4.2.0.jar") == "spark-sql-kafka-0-10_2.13"
    assert _stem("commons-pool2-2.13.1.jar") == "commons-pool2"


def test_a_source_at_another_version_than_pyspark_is_said() -> None:
    version, scala = spark_coordinates()
    assert source_note([Path(f"spark-sql-kafka-0-10_{scala}-{version}.jar")]) is None
    older = [Path("kafka-clients-3.9.2.jar"), Path(f"spark-sql-kafka-0-10_{scala}-3.9.9.jar")]
    note = source_note(older)
    assert note is not None and "3.9.9" in note and f"{version} is not on Maven Central" in note
