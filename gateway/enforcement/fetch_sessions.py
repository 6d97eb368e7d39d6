"""Incremental fetch sessions (KIP-227), owned by the connection that created them.

A broker serves an incremental Fetch from the partitions its session holds, not
from the names in the request, and it accepts any session id from any
connection. Forwarded as they come, a tenant could name another connection's
session and read its partitions, or evict it. So the gateway keeps, per client
connection, the sessions that connection created, and stands between the
client's view of each session and the broker's:

* ``wanted`` is the session as the client sees it (every partition it added and
  did not forget, with the parameters it last sent);
* ``upstream`` is the session as the broker holds it (what the gateway sent).

Each incremental request is turned into the *difference* between the allowed
part of ``wanted`` and ``upstream``: partitions added or changed, and partitions
to forget (forgotten by the client, or no longer allowed). Partitions the
principal may not read are answered with TOPIC_AUTHORIZATION_FAILED in every
response, as a broker does for the unauthorized partitions of a session.

Epochs: the client's epoch advances exactly as a broker's would, also when the
gateway answers a request itself (throttled, or nothing readable); the broker's
epoch advances only with what reaches it. The gateway translates one into the
other, so a locally answered request never costs the client its session.

A session id this connection did not create is never sent upstream: an
incremental request naming it gets FETCH_SESSION_ID_NOT_FOUND from the gateway
(the answer to a never-issued id; no broker involved, so no oracle), and a full
request naming it (which would close it) is forwarded with session id 0.
No I/O here.
"""

from __future__ import annotations

import dataclasses
import struct
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.codec import ProtocolError, response_body_offset
from ..protocol.errors import error_response
from .mirror import list_item_type, mirror

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SESSIONS_PER_CONNECTION = 8  # a Java consumer uses one per broker connection
SESSION_NOT_FOUND = ErrorCode.fetch_session_id_not_found  # 70
INVALID_EPOCH = ErrorCode.invalid_fetch_session_epoch  # 71
TOPIC_DENIED = ErrorCode.topic_authorization_failed  # 29

_OUTCOME = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id (v7+)
Key = tuple[Any, int]  # (topic name or topic id, partition index)
Allowed = Callable[[Any], bool]
"""May the connection's principal read this topic (name, or id from v13)?"""


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 2**31 - 1 else epoch + 1


def _topic_key(topic: Any) -> Any:
    return topic.topic if hasattr(topic, "topic") else topic.topic_id


def _entries(request: Any) -> dict[Key, Any]:
    return {(_topic_key(t), int(p.partition)): p for t in request.topics for p in t.partitions}


def _forgotten(request: Any) -> list[Key]:
    return [
        (_topic_key(t), int(p))
        for t in getattr(request, "forgotten_topics_data", ())
        for p in t.partitions
    ]


@dataclass(slots=True)
class FetchSession:
    session_id: int
    client_epoch: int  # the epoch the client must send next
    upstream_epoch: int  # the epoch the broker expects next
    wanted: dict[Key, Any]
    upstream: dict[Key, Any]


@dataclass(frozen=True, slots=True)
class FetchPlan:
    """What to do with one Fetch. ``forward`` None: answer with ``local``.
    ``merge`` adds the refused partitions to the broker's response; ``commit``
    takes the response's top-level error code and session id."""

    forward: Any | None
    local: Any | None
    merge: Callable[[Any], Any] | None
    commit: Callable[[int, int], None] | None
    denied: int
    effective: tuple[Key, ...] = ()  # every partition the request reads, sessions included


class FetchSessions:
    """The fetch sessions of one client connection."""

    def __init__(self, limit: int = MAX_SESSIONS_PER_CONNECTION) -> None:
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._limit = limit

    def __contains__(self, session_id: int) -> bool:
        return session_id in self._sessions

    def plan(
        self, request: Any, response_cls: type[Any], allowed: Allowed | None, local: bool = False
    ) -> FetchPlan:
        """Plan ``request``; ``allowed`` None: every topic; ``local``: answer it here
        (a throttled fetch), keeping the session's epochs right."""
        if not hasattr(request, "session_id"):  # v0-6: no sessions
            return self._full(request, response_cls, allowed, local, sessionless=True)
        session_id, epoch = int(request.session_id), int(request.session_epoch)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            own = self._sessions.pop(session_id, None)
            if session_id and own is None:  # not ours: never let it close another's session
                request = dataclasses.replace(request, session_id=0)
            return self._full(request, response_cls, allowed, local, epoch == FINAL_EPOCH)
        session = self._sessions.get(session_id)
        if session is None:
            return _refuse(response_cls, SESSION_NOT_FOUND)
        if epoch != session.client_epoch:
            return _refuse(response_cls, INVALID_EPOCH)
        return self._incremental(session, request, response_cls, allowed, local)

    # -- full requests ----------------------------------------------------------

    def _full(
        self,
        request: Any,
        response_cls: type[Any],
        allowed: Allowed | None,
        local: bool,
        sessionless: bool,
    ) -> FetchPlan:
        wanted = _entries(request)
        readable = _readable(wanted, allowed)
        keep = [t for t in request.topics if _topic_key(t) in readable]
        refused = [t for t in request.topics if _topic_key(t) not in readable]
        # partitions refused, each once (a request may name one twice): as ``effective``
        denied = sum(1 for key in wanted if key[0] not in readable) if refused else 0
        effective = tuple(wanted)
        if local or (refused and not keep):  # throttled, or nothing named may be read
            body = _respond(response_cls, 0, refused)
            return FetchPlan(None, body, None, None, denied, effective)
        merge = _add_refusals(response_cls, refused) if refused else None
        forward = request if not refused else dataclasses.replace(request, topics=tuple(keep))
        if sessionless:
            return FetchPlan(forward, None, merge, None, denied, effective)
        upstream = {k: p for k, p in wanted.items() if k[0] in readable}

        def commit(error_code: int, session_id: int) -> None:
            if error_code == 0 and session_id != 0:
                self._add(FetchSession(session_id, 1, 1, wanted, upstream))

        return FetchPlan(forward, None, merge, commit, denied, effective)

    def _add(self, session: FetchSession) -> None:
        self._sessions.pop(session.session_id, None)
        self._sessions[session.session_id] = session
        while len(self._sessions) > self._limit:
            self._sessions.popitem(last=False)

    # -- incremental requests ---------------------------------------------------

    def _incremental(
        self,
        session: FetchSession,
        request: Any,
        response_cls: type[Any],
        allowed: Allowed | None,
        local: bool,
    ) -> FetchPlan:
        wanted = session.wanted
        entries, forgotten = _entries(request), _forgotten(request)
        wanted.update(entries)
        for key in forgotten:
            wanted.pop(key, None)
        session.client_epoch = next_epoch(session.client_epoch)
        readable = _readable(wanted, allowed)
        refused_keys = [k for k in wanted if k[0] not in readable]
        refused = _request_topics(request, wanted, refused_keys)
        denied, effective = len(refused_keys), tuple(wanted)
        desired = {k: p for k, p in wanted.items() if k[0] in readable}
        if local or not desired:
            body = _respond(response_cls, session.session_id, refused)
            return FetchPlan(None, body, None, None, denied, effective)
        send = {k: p for k, p in desired.items() if session.upstream.get(k) != p}
        forget = [k for k in session.upstream if k not in desired]
        forward = request  # the usual case: the client's bytes are what the broker needs
        if not _as_asked(request, session.upstream_epoch, (entries, forgotten), (send, forget)):
            forward = dataclasses.replace(
                request,
                session_epoch=session.upstream_epoch,
                topics=_group_topics(request, send),
                forgotten_topics_data=_group_forgotten(request, forget),
            )
        session.upstream = dict(desired)
        session.upstream_epoch = next_epoch(session.upstream_epoch)
        session_id = session.session_id

        def commit(error_code: int, response_session: int) -> None:
            if error_code != 0 or response_session != session_id:
                self._sessions.pop(session_id, None)  # the broker dropped it; so does the client

        merge = _add_refusals(response_cls, refused) if refused else None
        return FetchPlan(forward, None, merge, commit, denied, effective)


def _as_asked(
    request: Any,
    upstream_epoch: int,
    asked: tuple[dict[Key, Any], list[Key]],
    needed: tuple[dict[Key, Any], list[Key]],
) -> bool:
    """Whether an incremental request already says, to the broker's session, exactly
    what it ``needed`` (its epoch, the partitions to send and to forget): then it is
    forwarded as the client's bytes, not re-encoded. ``asked``: its entries (one per
    partition, none named twice) and forgotten partitions."""
    entries, forgotten = asked
    send, forget = needed
    return (
        int(request.session_epoch) == upstream_epoch
        and send == entries
        and sum(len(topic.partitions) for topic in request.topics) == len(entries)
        and len(forget) == len(forgotten)
        and set(forget) == set(forgotten)
    )


def _readable(wanted: dict[Key, Any], allowed: Allowed | None) -> set[Any]:
    """The topics of ``wanted`` the principal may read, each asked once."""
    topics = dict.fromkeys(topic for topic, _ in wanted)
    return {t for t in topics if allowed is None or allowed(t)}


# -- building requests and responses --------------------------------------------


def _topic_cls(request: Any, field: str) -> type[Any]:
    return list_item_type(type(request), field)


def _key_field(topic_cls: type[Any]) -> str:
    return "topic" if any(f.name == "topic" for f in dataclasses.fields(topic_cls)) else "topic_id"


def _group_topics(request: Any, entries: dict[Key, Any]) -> tuple[Any, ...]:
    topic_cls = _topic_cls(request, "topics")
    key_field = _key_field(topic_cls)
    grouped: dict[Any, list[Any]] = {}
    for (topic, _), partition in entries.items():
        grouped.setdefault(topic, []).append(partition)
    return tuple(topic_cls(**{key_field: t, "partitions": tuple(ps)}) for t, ps in grouped.items())


def _group_forgotten(request: Any, keys: list[Key]) -> tuple[Any, ...]:
    topic_cls = _topic_cls(request, "forgotten_topics_data")
    key_field = _key_field(topic_cls)
    grouped: dict[Any, list[int]] = {}
    for topic, partition in keys:
        grouped.setdefault(topic, []).append(partition)
    return tuple(topic_cls(**{key_field: t, "partitions": tuple(ps)}) for t, ps in grouped.items())


def _request_topics(request: Any, wanted: dict[Key, Any], keys: list[Key]) -> list[Any]:
    """Request-shaped topic entries for ``keys`` (to mirror into refusals)."""
    return list(_group_topics(request, {k: wanted[k] for k in keys}))


def _refusal_entries(response_cls: type[Any], topics: list[Any]) -> tuple[Any, ...]:
    item_cls = list_item_type(response_cls, "responses")
    return tuple(mirror(item_cls, t, TOPIC_DENIED) for t in topics)


def _add_refusals(response_cls: type[Any], topics: list[Any]) -> Callable[[Any], Any]:
    refusals = _refusal_entries(response_cls, topics)

    def merge(response: Any) -> Any:
        return dataclasses.replace(response, responses=tuple(response.responses) + refusals)

    return merge


def _respond(response_cls: type[Any], session_id: int, refused: list[Any]) -> Any:
    body = error_response(response_cls, ErrorCode.none)
    changes: dict[str, Any] = {"responses": _refusal_entries(response_cls, refused)}
    if hasattr(body, "session_id"):
        changes["session_id"] = session_id
    return dataclasses.replace(body, **changes)


def _refuse(response_cls: type[Any], code: ErrorCode) -> FetchPlan:
    return FetchPlan(None, error_response(response_cls, code), None, None, 0)


def fetch_outcome(payload: memoryview, version: int) -> tuple[int, int]:
    """A Fetch response's top-level error code and session id, read in place (v7+)."""
    offset = response_body_offset(payload, 1, version)
    if len(payload) < offset + _OUTCOME.size:
        raise ProtocolError("Fetch response shorter than its fixed fields")
    _, error_code, session_id = _OUTCOME.unpack_from(payload, offset)
    return error_code, session_id
