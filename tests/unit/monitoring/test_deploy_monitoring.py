"""The committed alert rules pass promtool (check and unit tests); the Grafana dashboards
parse and query only metrics the gateway exports (names collected from its registries)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gateway.monitoring.collector import exported_names
from gateway.observability.metrics import AccessLogCollector, GatewayMetrics

ROOT = Path(__file__).resolve().parents[3]
PROMETHEUS = ROOT / "deploy" / "prometheus"
DASHBOARDS = sorted((ROOT / "deploy" / "grafana").glob("*.json"))
NAME = re.compile(r"\b(kgw_[a-z0-9_]+)")
BUILTIN = {"up"}  # Prometheus' own per-target series


def gateway_names() -> set[str]:
    """Every sample name on the gateway's /metrics: its registry, its per-request series
    and monitoring's collector."""
    metrics = GatewayMetrics()
    metrics.registry.register(AccessLogCollector(dict))
    names = set(exported_names())
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    # the per-request series are written at scrape time, outside the registry (0059)
    for family in [*metrics.registry.collect(), *metrics.request_series.collect()]:
        names.update(family.name + s for s in suffixes.get(family.type, ("",)))
    return names


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: apt-get install prometheus (scripts/setup.sh)")
    return path


def test_alert_rules_pass_promtool_check() -> None:
    result = subprocess.run(
        [promtool(), "check", "rules", "kgw-alerts.yml"],
        cwd=PROMETHEUS, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_alert_rules_pass_their_unit_tests() -> None:
    result = subprocess.run(
        [promtool(), "test", "rules", "kgw-alerts.test.yml"],
        cwd=PROMETHEUS, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_alert_rules_cover_the_seed_conditions_and_name_exported_metrics() -> None:
    rules = yaml.safe_load((PROMETHEUS / "kgw-alerts.yml").read_text())["groups"][0]["rules"]
    alerts = {rule["alert"]: rule["expr"] for rule in rules}
    for needed in (
        "KafkaOfflinePartitions", "KafkaUnderReplicatedPartitions", "KgwCanaryAvailabilityBelowSla",
        "KgwCanaryRecordsLost", "KgwConsumerLagAboveThreshold", "KgwGatewayDown",
    ):  # fmt: skip
        assert needed in alerts
    exported = gateway_names()
    for name, expr in alerts.items():
        for metric in NAME.findall(expr):
            assert metric in exported, f"{name} queries {metric}, which the gateway does not export"


def test_alertmanager_example_routes_critical_to_a_webhook() -> None:
    config = yaml.safe_load((PROMETHEUS / "alertmanager.yml").read_text())
    routes = config["route"]["routes"]
    critical = next(r for r in routes if 'severity = "critical"' in r["matchers"])
    receiver = next(r for r in config["receivers"] if r["name"] == critical["receiver"])
    assert receiver["webhook_configs"][0]["url"].startswith("http")


def test_alertmanager_example_passes_amtool() -> None:
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.fail("amtool is missing: apt-get install prometheus-alertmanager (scripts/setup.sh)")
    result = subprocess.run(
        [amtool, "check-config", "alertmanager.yml"],
        cwd=PROMETHEUS, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboards_parse_and_query_exported_metrics() -> None:
    assert len(DASHBOARDS) >= 2
    exported = gateway_names()
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        assert board["uid"] and board["panels"], path.name
        for panel in board["panels"]:
            assert panel["targets"], f"{path.name}: panel {panel['title']!r} has no query"
            for target in panel["targets"]:
                expr = target["expr"]
                names = NAME.findall(expr)
                assert names or any(b in expr for b in BUILTIN), f"{path.name}: {expr}"
                for metric in names:
                    assert metric in exported, f"{path.name}: {metric} is not exported"


def test_exported_names_follow_prometheus_conventions() -> None:
    for name in exported_names():
        assert re.fullmatch(r"kgw_[a-z0-9_]+", name), name
        assert not name.endswith("_total_total")
