"""Test tiers: each test is classified by the components it starts (docs/testing.md).

``redis``, ``kdc``, ``jvm``, ``cluster`` and ``image`` tests start a redis-server, an
MIT KDC, a JVM of their own (Spark, a Java tool; or they read Kafka's jars), a Kafka
cluster and gateway processes, or build and run the container image; a test may have
several. ``pure`` tests start none of them and
make up ``make test-fast``.

The classification reads what a test refers to, never a list of test names: the
names its function, the fixtures it uses and the suite's own helpers they call
mention (``LAUNCHERS``), and fixture parameters named after a tier (a ``store``
parametrized ``["file", "redis"]``). A test may also carry a tier marker itself.

A pure test runs under a guard: starting any program but a Python snippet
(``python -c``) or a one-shot check (``PURE_PROGRAMS``), or leaving a child running,
fails it. A test that starts a component in a way the classification cannot see
therefore fails in the fast tier instead of slowing it down.
"""

from __future__ import annotations

import functools
import inspect
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from types import CodeType
from typing import Any

import pytest

TIERS = ("redis", "kdc", "jvm", "cluster", "image")
PURE = "pure"
# Names (globals, attributes or modules) whose mention means the tier's component is
# started; a module name also covers its submodules.
LAUNCHERS = {
    "redis": frozenset({"RedisServer"}),
    "kdc": frozenset({"K5Realm"}),
    "jvm": frozenset(
        {"pyspark", "gateway.analytics.spark", "java_executable", "java_classpath", "ensure_kafka"}
    ),
    "cluster": frozenset({"KafkaCluster", "GatewayProcess"}),
    "image": frozenset({"build_image", "ImageRoot"}),  # the container image (buildah)
}
# One-shot checks a pure test may run: they read a file, answer and exit.
PURE_PROGRAMS = frozenset({"haproxy", "systemd-analyze", "promtool", "amtool"})


class TierError(AssertionError):
    """A test is in the wrong tier: the message says which and what to do."""


def _names(code: CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _names(const)


def _codes(obj: Any) -> Iterator[tuple[CodeType, dict[str, Any]]]:
    if inspect.isclass(obj):
        for member in vars(obj).values():
            yield from _codes(getattr(member, "__func__", member))
        return
    func = inspect.unwrap(getattr(obj, "__func__", obj))  # a test method is bound
    if inspect.isfunction(func):
        yield func.__code__, func.__globals__


def _is_suite_helper(obj: Any) -> bool:
    is_code = inspect.isfunction(obj) or inspect.isclass(obj)
    return is_code and str(getattr(obj, "__module__", "")).startswith("tests.")


def _launched(name: str) -> set[str]:
    return {
        tier
        for tier, names in LAUNCHERS.items()
        if name in names or any(name.startswith(f"{n}.") for n in names)
    }


_started_cache: dict[Any, frozenset[str]] = {}


def started_by(obj: Any) -> frozenset[str]:
    """The tiers whose components ``obj`` (a function or class) starts, following the
    test suite's own helpers it calls."""
    if obj in _started_cache:
        return _started_cache[obj]
    _started_cache[obj] = frozenset()  # a helper calling itself back adds nothing
    tiers: set[str] = set()
    for code, scope in _codes(obj):
        for name in _names(code):
            tiers |= _launched(name)
            helper = scope.get(name)
            if helper is not obj and _is_suite_helper(helper):
                tiers |= started_by(helper)
    _started_cache[obj] = frozenset(tiers)
    return _started_cache[obj]


def _fixture_funcs(item: pytest.Item) -> Iterator[Callable[..., Any]]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return
    for name, defs in info.name2fixturedefs.items():
        index = len(defs) - 1
        while index >= 0:  # the override in use, and what it overrides when it asks for it
            yield defs[index].func
            if name not in defs[index].argnames:
                break
            index -= 1


def tiers_of(item: pytest.Item) -> set[str]:
    """The component tiers of ``item``: marked, started, or named by a parameter."""
    tiers = {tier for tier in TIERS if item.get_closest_marker(tier) is not None}
    if item.get_closest_marker("integration") is not None:  # "needs the real Kafka cluster"
        tiers.add("cluster")
    function = getattr(item, "obj", None)
    if function is not None:
        tiers |= started_by(function)
    for func in _fixture_funcs(item):
        tiers |= started_by(func)
    return tiers | _named_by_fixture_params(item)


def _named_by_fixture_params(item: pytest.Item) -> set[str]:
    """Tiers a parametrized fixture's current parameter names (``store[redis]``)."""
    callspec = getattr(item, "callspec", None)
    info = getattr(item, "_fixtureinfo", None)
    if callspec is None or info is None:
        return set()
    # Only a fixture declared with params=: a test's own parametrize has params None.
    declared = {n for n, defs in info.name2fixturedefs.items() if defs[-1].params is not None}
    return {
        value
        for name, value in callspec.params.items()
        if name in declared and isinstance(value, str) and value in TIERS
    }


def classify(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks every item with its component tiers, or ``pure`` when it has none."""
    config.stash[CLASSIFIED] = len(items)
    for item in items:
        tiers = tiers_of(item)
        if tiers and item.get_closest_marker(PURE) is not None:
            raise pytest.UsageError(f"{item.nodeid} is marked pure but starts {sorted(tiers)}")
        for tier in sorted(tiers) or [PURE]:
            item.add_marker(tier)


def is_pure(item: pytest.Item) -> bool:
    return item.get_closest_marker(PURE) is not None


def _runs_a_snippet(args: list[str]) -> bool:
    for arg in args[1:]:
        if arg == "-c":
            return True
        if arg == "-m" or not arg.startswith("-"):
            return False
    return False


def _refusal(args: Any, executable: Any, env: Any, shell: bool) -> str | None:
    """Why a pure test may not run this, or None when it may."""
    argv = [os.fsdecode(a) for a in ([args] if isinstance(args, (str, bytes)) else args)]
    if shell:
        return f"a shell ({argv[0]!r}): run the program itself"
    program = os.fsdecode(executable) if executable is not None else argv[0]
    path = (env if env is not None else os.environ).get("PATH")
    resolved = program if os.sep in program else shutil.which(program, path=path) or program
    if os.path.realpath(resolved) == os.path.realpath(sys.executable):
        return None if _runs_a_snippet(argv) else f"Python with {argv[1:3]} (only -c is pure)"
    if os.path.basename(resolved) in PURE_PROGRAMS:
        return None
    return repr(program)


class PureGuard:
    """While active, ``subprocess.Popen`` (and so asyncio's subprocesses, Spark's JVM,
    k5test's KDC) refuses what a pure test may not start, and keeps what it started."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.refused: list[str] = []
        self.started: list[subprocess.Popen[Any]] = []
        self.refusing = True  # off for teardown, where wider fixtures may stop their servers
        self._original: Any = None

    def __enter__(self) -> PureGuard:
        original = self._original = subprocess.Popen._execute_child  # type: ignore[attr-defined]
        signature = inspect.signature(original)
        guard = self

        @functools.wraps(original)  # so a guard inside a guard reads the same signature
        def execute_child(popen: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(popen, *args, **kwargs).arguments
            why = _refusal(bound["args"], bound["executable"], bound["env"], bound["shell"])
            if why is not None and guard.refusing:
                message = (
                    f"{guard.nodeid} is in the pure tier but started {why}. Use the fixture "
                    "that starts the component, or mark the test with its tier "
                    "(docs/testing.md)."
                )
                guard.refused.append(message)
                raise TierError(message)
            result = original(popen, *args, **kwargs)
            guard.started.append(popen)
            return result

        subprocess.Popen._execute_child = execute_child  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.Popen._execute_child = self._original  # type: ignore[attr-defined]

    def check(self) -> None:
        """Fails the test for what it was refused (even if it swallowed the error) and
        for children it left running, which it kills."""
        running = [p for p in self.started if p.poll() is None]
        for popen in running:
            popen.kill()
            popen.wait(10)
        problems = list(self.refused)
        problems += [f"{self.nodeid} left {p.args!r} running (killed)" for p in running]
        self.refused.clear()
        self.started.clear()
        if problems:
            raise TierError("\n".join(problems))


GUARD = pytest.StashKey[PureGuard]()
CLASSIFIED = pytest.StashKey[int]()  # how many tests there were before any was deselected
