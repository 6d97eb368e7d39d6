"""The test tiers cannot rot silently: every test has one, a test using a component's
fixture is never pure, and a pure test that starts a component fails (tests/tiers.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from k5test import K5Realm

from gateway.devstack.kafka_cluster import KafkaCluster
from tests import tiers
from tests.redis_server import RedisServer

# Fixtures that start a component, by tier: a cross-check of the classification that
# does not read code. A new component fixture belongs here too.
COMPONENT_FIXTURES = {
    "redis_server": "redis",
    "redis_url": "redis",
    "kdc": "kdc",
    "spark": "jvm",
    "kafka_cluster": "cluster",
    "gateway_image": "image",
}


# Never called: what the classification reads. The tests get them as parameters, so
# that the tests themselves stay pure.
def _redis(tmp: Path) -> None:
    RedisServer(tmp).start()


def _through_a_helper(tmp: Path) -> None:
    _redis(tmp)


def _kdc() -> None:
    K5Realm()


def _spark() -> None:
    from pyspark.sql import SparkSession

    SparkSession.builder.getOrCreate()


class _Stack:
    def start(self, tmp: Path) -> None:
        KafkaCluster(tmp).start()


def _pure(tmp: Path) -> None:
    (tmp / "x").write_text(str(sys.executable))


@pytest.mark.parametrize(
    ("helper", "expected"),
    [(_redis, {"redis"}), (_through_a_helper, {"redis"}), (_kdc, {"kdc"}), (_spark, {"jvm"}),
     (_Stack, {"cluster"}), (_pure, set())],
    ids=["redis", "through-a-helper", "kdc", "spark", "class", "pure"],
)  # fmt: skip
def test_what_code_starts_is_read_through_the_suites_helpers(
    helper: Any, expected: set[str]
) -> None:
    assert tiers.started_by(helper) == expected


def test_every_test_has_one_tier_and_component_fixtures_are_never_pure(
    request: pytest.FixtureRequest,
) -> None:
    component_tiers = set(tiers.TIERS)
    seen: set[str] = set()
    for item in request.session.items:
        marks = {m.name for m in item.iter_markers()} & (component_tiers | {tiers.PURE})
        assert marks, f"{item.nodeid} has no tier"
        assert marks == {tiers.PURE} or tiers.PURE not in marks, (item.nodeid, marks)
        for name in set(item.fixturenames) & set(COMPONENT_FIXTURES):
            assert COMPONENT_FIXTURES[name] in marks, f"{item.nodeid} uses {name}: {marks}"
        seen |= marks
    config = request.config
    whole_suite = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    if whole_suite and len(request.session.items) == config.stash[tiers.CLASSIFIED]:
        assert seen >= component_tiers | {tiers.PURE}, f"a tier lost all its tests: {seen}"


def test_this_pure_test_runs_under_the_guard(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker(tiers.PURE) is not None
    guard = request.node.stash[tiers.GUARD]
    with pytest.raises(tiers.TierError, match="in the pure tier but started 'redis-server'"):
        subprocess.run(["redis-server", "--version"], check=False, timeout=10)
    assert len(guard.refused) == 1
    guard.refused.clear()  # refused on purpose; the guard would fail this test for it


@pytest.mark.parametrize(
    "argv",
    [
        ["redis-server", "--version"],
        ["java", "-version"],
        ["/usr/sbin/krb5kdc", "-h"],
        ["spark-submit", "--version"],
        [sys.executable, "-m", "gateway", "--version"],
        [sys.executable, "no-such-script.py"],
    ],
)  # each exits at once should the guard let it through
def test_a_pure_test_may_not_start_a_component(argv: list[str]) -> None:
    with tiers.PureGuard("probe") as guard, pytest.raises(tiers.TierError):
        subprocess.run(argv, check=False, timeout=10)
    with pytest.raises(tiers.TierError, match="probe is in the pure tier"):
        guard.check()  # fails even when the code under test swallowed the error


async def test_asyncio_subprocesses_are_guarded_too() -> None:
    with tiers.PureGuard("probe") as guard, pytest.raises(tiers.TierError):
        await asyncio.create_subprocess_exec("java", "-version")
    guard.refused.clear()


def test_python_snippets_and_one_shot_checks_are_pure() -> None:
    with tiers.PureGuard("probe") as guard:
        done = subprocess.run(
            [sys.executable, "-c", "print(6 * 7)"], capture_output=True, timeout=10
        )
    assert done.stdout == b"42\n"
    guard.check()
    assert tiers._refusal(["haproxy", "-c", "-f", "x.cfg"], None, None, False) is None
    assert tiers._refusal("ls -l", None, None, True) is not None  # a shell hides the program


def test_a_child_left_running_fails_the_test() -> None:
    with tiers.PureGuard("probe") as guard:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with pytest.raises(tiers.TierError, match=r"left .* running"):
        guard.check()
    assert child.poll() is not None  # killed
