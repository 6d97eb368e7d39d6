"""Whole-pipeline scenarios for the connection core (scenarios/*.yaml): given these frames
from the client and the broker, expect these commands. No sockets, no mocks of the
gateway's logic (``harness.build`` says what each connection is made of).

A scenario file is a list of scenarios::

    - name: what it shows
      setup: {auth: sasl, policy: [...], quotas: {...}, filters: [...], ...}  # harness.build
      steps:
        - <event>: <value>
          expect: [<command>, ...]  # every command, in order (an empty list: none)
          state: open               # the connection's state afterwards (optional)

Events (one per step):
  ``opened: <host>|null`` · ``request: <frame>`` · ``requests: [<frame>, ...]`` (one
  read) · ``response: <answer>`` · ``responses: [<answer>, ...]`` · ``step_done: ok|crash``
  (runs the last RunStep's mechanism for real) · ``work_done: null`` (runs the last
  RunWork for real) · ``timer: throttle|auth-deadline|login-delay`` · ``drain: null`` ·
  ``closed: <reason>|null``.
  A <frame> is ``{api: Metadata, version: 12, id: 1, body: {...}}`` with optional
  ``plain: right|wrong`` (PLAIN bytes of the test's API key), ``truncate: n``,
  ``as_key``/``as_version`` (patched into the header), or ``{raw: <hex>}``.
  An <answer> is ``{body: {...}}`` for the oldest forwarded request still unanswered,
  or ``{id: n, ...}`` for that one; ``correlation: n`` puts another id in the frame.

Commands (a bare name or a one-key mapping):
  ``forward: [<check>, ...]`` / ``reply: [<check>, ...]`` (or a count) · ``pause: <reason>``
  · ``resume: <reason>`` · ``start_timer: <name>|{name, seconds}`` · ``run_step`` ·
  ``run_work`` · ``record: <count>|{count, decisions: [...]}`` · ``login_outcome:
  {succeeded, error}`` · ``locked_out: {kind, name, seconds}`` · ``open_listener: <node>``
  · ``close: <side>|{side, quiet, reason}`` (reason: a substring).
  A <check> of a frame: ``id``, ``api``, ``names`` (resource names in the decoded
  message), ``errors`` (``{label: code}``, labels as ``enforcement/build.error_codes``
  gives them), ``fields`` (``{field: value}``), ``lengths`` (``{field: entries}``),
  ``brokers`` (``[[node, host, port]]``), ``throttle_ms``, ``api_keys`` (ApiVersions:
  ``[[key, min, max]]``), ``header_error`` (the int16 right after a response header v0).
"""

from __future__ import annotations

import copy
import re
import struct
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.core import commands as cmd
from gateway.core.events import (
    Closed,
    Drain,
    Event,
    Opened,
    RequestFrames,
    ResponseFrames,
    TimerFired,
)
from gateway.protocol import apis
from gateway.protocol.codec import (
    decode_request,
    decode_response,
    parse_request_head,
    peek_request,
)

from ..conftest import MakeAuthorizer
from ..enforcement.build import error_codes
from ..enforcement.test_scenarios import names_in
from .harness import Harness, api_key, build, correlation_of_response

SCENARIOS = [
    (path.stem, case)
    for path in sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))
    for case in yaml.safe_load(path.read_text())
]
EVENTS = frozenset(
    {"opened", "request", "requests", "response", "responses", "step_done", "work_done",
     "timer", "drain", "closed"}
)  # fmt: skip
DECODED = frozenset({"names", "errors", "fields", "brokers", "throttle_ms", "api_keys", "lengths"})


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def kind(command: cmd.Command) -> str:
    return _snake(type(command).__name__)


async def event_of(harness: Harness, step: Mapping[str, Any]) -> Event:
    names = [key for key in step if key in EVENTS]
    assert len(names) == 1, f"a step has exactly one event: {sorted(step)}"
    name = names[0]
    value = step[name]
    match name:
        case "opened":
            return Opened(value or harness.identity.host)
        case "request":
            return RequestFrames([harness.request(value)])
        case "requests":
            return RequestFrames([harness.request(item) for item in value])
        case "response":
            return ResponseFrames([harness.response(value or {})])
        case "responses":
            return ResponseFrames([harness.response(item) for item in value])
        case "step_done":
            return await harness.step_done(value or "ok")
        case "work_done":
            return await harness.work_done()
        case "timer":
            return TimerFired(value)
        case "drain":
            return Drain()
    return Closed(value or "client disconnected")


def _one(item: Any) -> tuple[str, Any]:
    if isinstance(item, str):
        return item, None
    ((name, value),) = item.items()
    return str(name), value


def check_frames(harness: Harness, frames: list[bytes], want: Any, request: bool) -> None:
    if want is None:  # a bare ``forward`` / ``reply``
        return
    if isinstance(want, int):
        assert len(frames) == want, "number of frames"
        return
    assert len(frames) == len(want), "number of frames"
    for data, spec in zip(frames, want, strict=True):
        payload = memoryview(data)[4:]
        if request:
            key, version, correlation_id = peek_request(payload)
        else:
            correlation_id = correlation_of_response(data)
            key, version = harness.sent[correlation_id]
        if "id" in spec:
            assert correlation_id == spec["id"], "correlation id"
        if "api" in spec:
            assert key == api_key(spec["api"]), "api"
        if "header_error" in spec:
            assert struct.unpack_from(">h", data, 8)[0] == spec["header_error"]
        if not DECODED & set(spec):
            continue
        if request:
            decoded: Any = decode_request(parse_request_head(payload), payload)
        else:
            decoded = decode_response(payload, key, version)
        if "names" in spec:
            assert names_in(decoded) == set(spec["names"]), f"names in {decoded}"
        codes = error_codes(decoded)
        for label, code in (spec.get("errors") or {}).items():
            assert codes.get(label) == code, f"{label}: {codes}"
        for name, value in (spec.get("fields") or {}).items():
            assert getattr(decoded, name) == value, name
        for name, size in (spec.get("lengths") or {}).items():
            assert len(getattr(decoded, name)) == size, f"entries in {name}"
        if "brokers" in spec:
            brokers = [[int(b.node_id), b.host, int(b.port)] for b in decoded.brokers]
            assert brokers == spec["brokers"], "brokers"
        if "api_keys" in spec:
            ranges = sorted([int(a.api_key), int(a.min_version), int(a.max_version)]
                            for a in decoded.api_keys)  # fmt: skip
            assert ranges == sorted(spec["api_keys"]), "ApiVersions ranges"
        if "throttle_ms" in spec:
            ms = decoded.throttle_time.total_seconds() * 1000
            assert ms == pytest.approx(spec["throttle_ms"], abs=1), "throttle time"


def check_command(harness: Harness, command: cmd.Command, want: Any) -> None:
    match command:
        case cmd.Forward(frames):
            check_frames(harness, frames, want, request=True)
        case cmd.Reply(frames):
            check_frames(harness, frames, want, request=False)
        case cmd.Pause(reason) | cmd.Resume(reason):
            assert reason == want, "reason"
        case cmd.StartTimer(name, seconds):
            spec = {"name": want} if isinstance(want, str) else want
            assert name == spec["name"], "timer"
            if "seconds" in spec:
                assert seconds == pytest.approx(spec["seconds"], rel=0.05), "timer seconds"
        case cmd.RunStep(pending):
            if want is not None:
                assert pending.mechanism.name == want["mechanism"]
        case cmd.RunWork(work):
            if want is not None:
                assert work.name == want["name"]
        case cmd.Record(exchanges):
            spec = {"count": want} if isinstance(want, int) else want
            assert len(exchanges) == spec["count"], "exchanges"
            if "decisions" in spec:
                assert [e.decision for e in exchanges] == spec["decisions"]
        case cmd.LoginOutcome(mechanism, step):
            for name, value in (want or {}).items():
                actual = mechanism if name == "mechanism" else getattr(step, name)
                assert actual == value, name
        case cmd.LockedOut():
            for name, value in (want or {}).items():
                assert getattr(command, name) == value, name
        case cmd.OpenListener(node_id):
            assert node_id == want, "node id"
        case cmd.Close(reason, side, quiet, linger):
            spec = {"side": want} if isinstance(want, str) else want
            assert side == spec["side"], f"side of {reason!r}"
            if "quiet" in spec:
                assert quiet == spec["quiet"], "quiet"
            if "linger" in spec:
                assert linger == spec["linger"], f"linger of {reason!r}"
            if "reason" in spec:
                assert spec["reason"] in reason, "reason"


def check_commands(harness: Harness, commands: list[cmd.Command], expect: list[Any]) -> None:
    wanted = [_one(item) for item in expect]
    assert [kind(c) for c in commands] == [name for name, _ in wanted], commands
    for command, (name, value) in zip(commands, wanted, strict=True):
        try:
            check_command(harness, command, value)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}\n{command}") from None


async def run_scenario(case: Mapping[str, Any], tmp_path: Path, authorizer: MakeAuthorizer) -> None:
    harness = await build(case.get("setup") or {}, tmp_path, authorizer)
    try:
        for number, step in enumerate(case["steps"], 1):
            event = await event_of(harness, step)
            commands = harness.handle(event)
            try:
                check_commands(harness, commands, step["expect"])
                if "state" in step:
                    assert harness.state == step["state"], "state"
            except AssertionError as exc:
                where = f"step {number} ({type(event).__name__})"
                raise AssertionError(f"{where}: {exc}") from None
    finally:
        await harness.close()


@pytest.mark.parametrize(
    ("file", "case"), SCENARIOS, ids=[f"{f}:{c['name']}" for f, c in SCENARIOS]
)
async def test_scenario(
    file: str, case: dict[str, Any], tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    await run_scenario(case, tmp_path, make_authorizer)


# A scenario that cannot fail is a defect: each of these breaks one expectation of one
# scenario (its name's start, the step, the key in that step, the wrong value).
BROKEN = [
    ("a locally answered", 4, "expect", [{"reply": [{"id": 2}, {"id": 1}]}]),
    ("a locally answered", 3, "expect", [{"reply": [{"id": 2}]}]),
    ("ApiVersions is forwarded", 3, "expect", [{"reply": [{"api_keys": [[3, 0, 13]]}]}]),
    ("an unknown API key", 2, "expect", [{"reply": 1}, {"close": "gateway"}]),
    ("a PLAIN login succeeds", 4, "state", "open"),
    ("a PLAIN login succeeds", 5, "expect",
     [{"login_outcome": {"succeeded": True}}, {"reply": 1}, {"resume": "authenticating"},
      {"forward": [{"id": 4}, {"id": 3}]}]),
    ("repeated failures delay", 4, "expect",
     [{"login_outcome": {"succeeded": False}}, {"start_timer": {"name": "login-delay",
                                                                "seconds": 4}}]),
    ("the failure that reaches", 4, "expect",
     [{"locked_out": {"kind": "principal"}}, "login_outcome", {"reply": 1}, "close"]),
    ("a request denied in part", 3, "expect",
     [{"reply": [{"errors": {"secret.error_code": 0}}]}, "record"]),
    ("a request denied whole", 2, "expect", ["reply", {"record": {"count": 1,
                                                                    "decisions": ["allow"]}}]),
    ("over the request quota", 5, "expect",
     [{"reply": [{"throttle_ms": 500}]}, {"pause": "throttle"}, "start_timer"]),
    ("a ClientQuotas alter", 6, "expect", [{"reply": 1}, {"resume": "working"}]),
    ("a filter that replaces a request", 2, "expect", [{"forward": [{"names": ["a", "b"]}]}]),
    ("a filter that replaces a response", 3, "expect", [{"reply": [{"names": ["a", "b"]}]}]),
    ("a Metadata response naming", 5, "expect", [{"reply": 1}, {"open_listener": 1}]),
    ("draining answers what is owed", 5, "expect",
     [{"reply": 1}, {"close": {"side": "gateway", "quiet": False}}]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "number", "key", "wrong"), BROKEN, ids=[b[0] for b in BROKEN])
async def test_a_broken_expectation_fails(
    name: str, number: int, key: str, wrong: Any, tmp_path: Path, make_authorizer: MakeAuthorizer
) -> None:
    (case,) = [c for _, c in SCENARIOS if c["name"].startswith(name)]
    broken = copy.deepcopy(case)
    assert broken["steps"][number - 1][key] != wrong
    broken["steps"][number - 1][key] = wrong
    with pytest.raises(AssertionError, match=f"^step {number} "):
        await run_scenario(broken, tmp_path, make_authorizer)


def test_scenarios_cover_every_command_and_event() -> None:
    """Each kind of command and event appears in some scenario's expectations."""
    seen_commands: set[str] = set()
    seen_events: set[str] = set()
    for _, case in SCENARIOS:
        for step in case["steps"]:
            seen_events |= EVENTS & set(step)
            seen_commands |= {_one(item)[0] for item in step["expect"]}
    every = {_snake(typ.__name__) for typ in typing.get_args(cmd.Command)}
    assert every <= seen_commands, every - seen_commands
    assert seen_events == EVENTS


def test_the_api_names_resolve() -> None:
    assert api_key("Metadata") == apis.METADATA
    assert api_key("SaslAuthenticate") == apis.SASL_AUTHENTICATE
    assert api_key("alter_client_quotas") == 49
