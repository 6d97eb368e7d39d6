"""A connection core built from real parts, and the frames to feed it. No sockets.

``build(setup)`` makes a ``core.Connection`` over a real ``Session``: an ``Enforcer``
on a real casbin ``Authorizer`` when there is a policy, a ``SaslServer`` with PLAIN on
a file credential store holding one API key made now, a ``QuotaEngine`` on a quota
file, operators' filters defined here by name. Only the clocks and the tenants'
blocked set are fakes. ``Harness`` builds request and response frames from plain
data (``tests/unit/enforcement/build.py``) and remembers what it sent and what the
core forwarded, so a broker answer needs no correlation id.
"""

from __future__ import annotations

import re
import struct
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from gateway.addresses.topology import PublicMap, Topology
from gateway.config import ListenerConfig
from gateway.core import Connection, CoreServices
from gateway.core import commands as cmd
from gateway.core.events import Event, StepDone, WorkDone
from gateway.credentials import CredentialStore
from gateway.credentials.file_backend import FileBackend
from gateway.enforcement import Enforcer
from gateway.filters.api import BaseFilter, RequestCall, ResponseCall
from gateway.filters.chain import FilterChain
from gateway.identity import ClientIdentity
from gateway.protocol import apis
from gateway.protocol.codec import encode_request, encode_response, peek_request
from gateway.protocol.framing import frame
from gateway.quotas import QuotaConfig, QuotaEngine, Target
from gateway.quotas.admin import QuotaAdmin
from gateway.quotas.store import FileQuotaStore
from gateway.quotas.throttle import Throttle
from gateway.sasl import FailureLimiter, SaslServer, address_key
from gateway.sasl.connection import Authentication
from gateway.sasl.gate import LoginGate
from gateway.session import Session

from ..conftest import MakeAuthorizer
from ..enforcement.build import from_data

HOST = "10.0.0.1"
PRINCIPAL = "User:alice"  # the identity on a listener without SASL
TENANT = "acme"  # the tenant of the API key made for SASL listeners


class Clock:
    """A clock that stands still (quota buckets, the failure limiter)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Tenants:
    """The blocked set of ``tenants.TenantWatch``, as ``sasl.gate`` asks it."""

    def __init__(self, blocked: list[str]) -> None:
        self._blocked = frozenset(blocked)

    def blocked(self, tenant: str | None) -> bool:
        return tenant is not None and tenant in self._blocked


# -- operators' filters, referenced by name in scenarios ----------------------------


class RejectMetadata(BaseFilter):
    """Refuses every Metadata request with POLICY_VIOLATION."""

    name = "reject-metadata"
    api_keys = frozenset({apis.METADATA})

    def on_request(self, call: RequestCall) -> None:
        call.reject(ErrorCode.policy_violation, "metadata is not for you")


class FirstTopicOnly(BaseFilter):
    """Forwards a Metadata request naming several topics with the first one only."""

    name = "first-topic-only"
    api_keys = frozenset({apis.METADATA})

    def on_request(self, call: RequestCall) -> None:
        topics = call.body.topics
        if topics is not None and len(topics) > 1:
            call.evolve(topics=topics[:1])


class HideInternal(BaseFilter):
    """Leaves topics starting with ``_`` out of Metadata responses."""

    name = "hide-internal"
    api_keys = frozenset({apis.METADATA})

    def on_response(self, call: ResponseCall) -> None:
        topics = tuple(t for t in call.body.topics if not str(t.name).startswith("_"))
        if len(topics) != len(call.body.topics):
            call.evolve(topics=topics)


class Crash(BaseFilter):
    """A filter with a bug: raises on every Metadata request."""

    name = "crash"
    api_keys = frozenset({apis.METADATA})

    def on_request(self, call: RequestCall) -> None:
        raise RuntimeError("a bug in the filter")


FILTERS: dict[str, type[BaseFilter]] = {
    f.name: f for f in (RejectMetadata, FirstTopicOnly, HideInternal, Crash)
}


# -- API names and frames -----------------------------------------------------------


def api_key(name: str) -> int:
    """``Metadata``, ``metadata`` or ``SaslAuthenticate`` → the API key."""
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    for key in apis.gateway_apis():
        if apis.api_name(key) == snake:
            return key
    for key, known in api_key_map.items():
        if known == snake:
            return int(key)
    raise KeyError(f"unknown API {name!r}")


def correlation_of_response(data: bytes) -> int:
    return int(struct.unpack_from(">i", data, 4)[0])


# -- the world a connection lives in ------------------------------------------------


@dataclass
class Harness:
    """One connection under test, what it was built from, and what went back and forth."""

    connection: Connection
    session: Session
    identity: ClientIdentity
    key_id: str = ""
    secret: str = ""
    sasl: SaslServer | None = None
    sent: dict[int, tuple[int, int]] = field(default_factory=dict)  # id → (key, version)
    upstream: deque[tuple[int, int, int]] = field(default_factory=deque)  # forwarded, unanswered
    step: cmd.RunStep | None = None  # the last RunStep the core asked for
    work: cmd.RunWork | None = None  # the last RunWork the core asked for

    @property
    def state(self) -> str:
        return self.connection.state.value

    def handle(self, event: Event) -> list[cmd.Command]:
        """Feed one event; note what was forwarded and what must be run."""
        commands = self.connection.handle(event)
        for command in commands:
            match command:
                case cmd.Forward(frames):
                    for data in frames:
                        key, version, correlation_id = peek_request(memoryview(data)[4:])
                        self.upstream.append((correlation_id, key, version))
                case cmd.RunStep():
                    self.step = command
                case cmd.RunWork():
                    self.work = command
        return commands

    def request(self, spec: Mapping[str, Any]) -> bytes:
        """A request frame: ``{api, version, id, body}``; ``plain: right|wrong`` fills a
        SaslAuthenticate's PLAIN bytes with the API key made for this test; ``truncate:
        n`` cuts ``n`` bytes off the body; ``as_key``/``as_version`` patch the header;
        ``raw: <hex>`` is a frame as given."""
        if "raw" in spec:
            return bytes.fromhex(str(spec["raw"]))
        key, version, correlation_id = api_key(spec["api"]), int(spec["version"]), int(spec["id"])
        body = dict(spec.get("body") or {})
        if "plain" in spec:
            secret = self.secret if spec["plain"] == "right" else "not-the-secret"
            body["auth_bytes"] = f"\0{self.key_id}\0{secret}".encode()
        request = from_data(apis.request_schema(key, version), body)
        data = encode_request(key, version, correlation_id, "app", request)
        if "truncate" in spec:
            data = frame(data[4 : -int(spec["truncate"])])
        if "as_key" in spec or "as_version" in spec:
            key, version = int(spec.get("as_key", key)), int(spec.get("as_version", version))
            patched = bytearray(data)
            struct.pack_into(">hh", patched, 4, key, version)
            data = bytes(patched)
        self.sent[correlation_id] = (key, version)
        return data

    def response(self, spec: Mapping[str, Any]) -> bytes:
        """The broker's answer to a forwarded request (``id``; else the oldest one still
        unanswered): ``{body}``; ``correlation`` puts another id in the frame."""
        if "id" in spec:
            wanted = int(spec["id"])
            entry = next(item for item in self.upstream if item[0] == wanted)
            self.upstream.remove(entry)
        else:
            entry = self.upstream.popleft()
        correlation_id, key, version = entry
        body = from_data(apis.response_schema(key, version), dict(spec.get("body") or {}))
        return encode_response(key, version, int(spec.get("correlation", correlation_id)), body)

    async def step_done(self, outcome: str = "ok") -> StepDone:
        """Run the mechanism of the last ``RunStep`` for real (``crash``: it raised)."""
        assert self.step is not None, "no RunStep to answer"
        pending, self.step = self.step.pending, None
        if outcome == "crash":
            return StepDone(None, RuntimeError("a bug in the mechanism"))
        return StepDone(await pending.mechanism.step(pending.auth_bytes))

    async def work_done(self) -> WorkDone:
        """Run the local work of the last ``RunWork`` for real (the store, the topics)."""
        assert self.work is not None, "no RunWork to answer"
        work, self.work = self.work.work, None
        try:
            outcome: object = await work.run()
        except Exception as exc:  # the unit answers it, as the network layer does
            outcome = exc
        return WorkDone(outcome)

    async def close(self) -> None:
        if self.sasl is not None:
            await self.sasl.close()


def _topics_source(topics: Mapping[str, int]) -> Any:
    async def fetch() -> Mapping[str, int]:
        return dict(topics)

    return fetch


def _engine(config: Mapping[str, Any], tmp_path: Path, clock: Clock) -> QuotaEngine:
    store = FileQuotaStore(tmp_path / "quotas.json")
    for target, values in (config.get("store") or {}).items():
        store.set_values(Target.parse(target), values, "test")
    settings = {"store_file": store.path, **(config.get("config") or {})}
    return QuotaEngine.from_config(QuotaConfig.model_validate(settings), clock=clock)


async def build(
    setup: Mapping[str, Any], tmp_path: Path, make_authorizer: MakeAuthorizer
) -> Harness:
    """A connection as ``runtime.gateway`` and ``runtime.sessions`` compose it.

    ``setup`` keys (all optional): ``auth`` (``none`` | ``sasl``), ``principal`` and
    ``tenant`` (the identity without SASL), ``policy`` (casbin lines: authorization
    on), ``super_users``, ``quotas`` (``{store: {target: values}, config: {...}}``:
    throttling, quota admin, licence and connection limits), ``cluster_topics``
    (``{name: partitions}`` for licence counts), ``filters`` (names in ``FILTERS``),
    ``observe`` (access log), ``max_inflight``, ``auth_timeout_s``, ``limiter``
    (``FailureLimiter`` settings), ``locked_hosts`` (failures recorded before),
    ``blocked_tenants``, ``host``.
    """
    clock = Clock()
    host = str(setup.get("host", HOST))
    identity = ClientIdentity(
        "public", host, 5555, str(setup.get("principal", PRINCIPAL)), tenant=setup.get("tenant")
    )
    listener = ListenerConfig(
        name="public", bootstrap_port=19092, broker_port_base=19100, advertised_host="gw.example"
    )
    mapping = PublicMap(listener, Topology())
    enforcer = None
    if "policy" in setup:
        authorizer = make_authorizer(list(setup["policy"]), setup.get("super_users"))
        enforcer = Enforcer(authorizer, identity)
    limits = dict(setup.get("limiter") or {})
    limiter = FailureLimiter(clock=clock, **limits)
    for locked in setup.get("locked_hosts") or []:
        failures = int(limits["lockout_address_failures"])  # locking needs a threshold
        for _ in range(failures):
            limiter.record_failure(address_key(str(locked)))
        assert limiter.locked_out(address_key(str(locked)))
    harness_auth, sasl, key_id, secret = None, None, "", ""
    if setup.get("auth", "none") == "sasl":
        store = CredentialStore(FileBackend(tmp_path / "credentials.json"))
        key, secret = await store.create_api_key(
            principal="User:alice", tenant=TENANT, actor="test"
        )
        key_id = key.key_id
        sasl = SaslServer(["PLAIN"], store=store, limiter=limiter)
        identity.principal = "User:ANONYMOUS"
        harness_auth = Authentication(sasl, identity, 3600)
    engine = throttle = admin = None
    if "quotas" in setup:
        engine = _engine(setup["quotas"] or {}, tmp_path, clock)
        throttle = Throttle(engine, identity)
        admin = QuotaAdmin(engine, identity, _topics_source(setup.get("cluster_topics") or {}))
    filters = None
    if setup.get("filters"):
        chain = FilterChain([FILTERS[name]() for name in setup["filters"]])
        filters = chain.bind(identity)
    session = Session(
        mapping,
        identity,
        enforcer,
        harness_auth,
        observe=bool(setup.get("observe", False)),
        throttle=throttle,
        admin=admin,
        bind_fetch_sessions=enforcer is not None,
        filters=filters,
    )
    services = CoreServices(
        max_inflight=int(setup.get("max_inflight", 1000)),
        auth_timeout_s=float(setup.get("auth_timeout_s", 0.0)),
        gate=LoginGate(limiter, Tenants(list(setup.get("blocked_tenants") or []))),
        quotas=engine,
    )
    return Harness(Connection(session, services), session, identity, key_id, secret, sasl)
