"""Record encryption at rest as a filter on the chain (``docs/encryption.md``).

Produce (0): the partitions of topics a policy covers for the connection's tenant get
their records encrypted (``records.encrypt_records``); if that cannot be done — KEK
disabled or gone, key manager unreachable past the DEK's bounds, records not in v2
batches — the whole request is refused with INVALID_RECORD and the reason, so nothing
is ever written in clear to such a topic. Fetch (1): the partitions of topics some
policy covers (and, from v13, topics named by id) are scanned and their envelopes
decrypted; a partition that cannot be decrypted is answered with CORRUPT_MESSAGE and
no records, never with ciphertext as data. Other topics are not touched: their
requests are not decoded; their responses are not parsed past the topic level.

The filter sees cluster-side topic names (a namespace filter, if any, runs first).
Key manager calls are made only on a DEK cache miss, and never on the event loop: they
run in a small pool (``kms.calls``), one per key however many connections need it.
Meanwhile a Produce waits (``RequestCall.wait_for``: that connection's later requests
wait behind it, every other connection goes on), then runs through the filter again.
A Fetch response is never held: a partition whose DEK is being unwrapped is answered
with no records (the client fetches the same offset again) and that connection's next
Fetch waits for the unwrap before it goes to the broker.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from pydantic import ValidationError

from ..filters.api import BaseFilter, FilterContext, RequestCall, ResponseCall
from ..kms import KmsError, open_kms
from ..kms.api import Kms
from ..kms.calls import RESULT_TTL_S, KmsCalls
from ..protocol.apis import ApiSpec
from .deks import DekCache, DekPending
from .policy import Policies
from .records import RecordsError, decrypt_records, encrypt_records, refuse_envelopes
from .settings import EncryptionSettings

PRODUCE, FETCH, METADATA = 0, 1, 3
PENDING = "dek_pending"  # context.state: unwraps a connection's next Fetch waits for
MAX_WAITS = 16
NAMED_TOPICS_MAX = {PRODUCE: 12, FETCH: 12}  # v13+ name topics by id only
UNDECRYPTED = frozenset({78})  # ShareFetch (KIP-932): records this filter does not open
log = logging.getLogger("kgw.encryption")


class EncryptionFilter(BaseFilter):
    name = "record-encryption"
    api_keys: frozenset[int] | None = frozenset({PRODUCE, FETCH, METADATA})

    def __init__(self, config: Mapping[str, Any] | None = None, kms: Kms | None = None) -> None:
        super().__init__(config)
        try:
            self.settings = EncryptionSettings.model_validate(dict(config or {}))
        except ValidationError as exc:
            raise ValueError(_errors(exc)) from None
        self.policies = Policies(self.settings.policies)
        self.kms = kms if kms is not None else open_kms(self.settings.kms)
        dek = self.settings.dek
        # a finished call waits for its request at most as long as a DEK is trusted
        # unasked (at least a second: the request is resumed as soon as it finishes)
        ttl = max(1.0, min(RESULT_TTL_S, dek.decrypt_cache_seconds))
        self.calls = KmsCalls(dek.kms_threads, result_ttl_s=ttl)
        self.deks = DekCache(self.kms, dek, calls=self.calls)
        # topic ids -> names, from the Metadata answers the brokers give (a cluster-wide
        # fact, not a connection's): Produce v13+ and Fetch v13+ name topics by id
        self.topic_names: dict[Any, str] = {}

    def advertise(self, context: FilterContext, key: int, spec: ApiSpec | None) -> ApiSpec | None:
        """ApiVersions offers Produce and Fetch up to v12, where topics are named: the
        policy and the envelope's associated data need the name, and a topic id seen
        before its Metadata (another worker process, a restart) would have none.
        Share groups' ShareFetch is not offered: its records are not decrypted here, and
        ciphertext is never handed out as data."""
        if key in UNDECRYPTED:
            return None
        top = NAMED_TOPICS_MAX.get(key)
        if spec is None or top is None or spec.max_version <= top:
            return spec
        if top < spec.min_version:
            return None
        return ApiSpec(spec.key, spec.name, spec.min_version, top)

    # -- Produce ---------------------------------------------------------------------

    def on_request(self, call: RequestCall) -> None:
        if call.api_key == FETCH:
            self._fetch_waits(call)
        if call.api_key != PRODUCE:
            return
        tenant = call.context.tenant
        body = call.body
        topics = []
        changed = False
        for topic in body.topic_data:
            name = self._name_of(topic, "name")
            if name is None:  # an id this gateway has not seen in Metadata yet
                call.reject(ErrorCode.unknown_topic_id, "refresh metadata and retry")
                return
            rule = self.policies.rule(tenant, name)
            if rule is None:
                # written in clear; on a topic whose fetches are scanned, no value may
                # look like an envelope (it would fail every consumer's fetch)
                if self.policies.any_covers(name) and not self._clear_ok(call, name, topic):
                    return
                topics.append(topic)
                continue
            partitions = []
            for partition in topic.partition_data:
                if partition.records is None:
                    partitions.append(partition)
                    continue
                try:
                    sealed = encrypt_records(bytes(partition.records), name, rule, self.deks)
                except DekPending as pending:  # a key manager call: wait, then again
                    call.wait_for(pending.wait)
                    return
                except (RecordsError, KmsError) as exc:
                    self._refuse(call, f"records for {name!r} cannot be encrypted: {exc}")
                    return
                except Exception as exc:  # never in clear, whatever went wrong
                    self._refuse(call, f"records for {name!r} cannot be encrypted", exc)
                    return
                partitions.append(dataclasses.replace(partition, records=sealed))
            topics.append(dataclasses.replace(topic, partition_data=tuple(partitions)))
            changed = True
        if changed:
            call.evolve(topic_data=tuple(topics))

    @staticmethod
    def _fetch_waits(call: RequestCall) -> None:
        """A Fetch of a connection whose last Fetch met a DEK being unwrapped waits
        for the unwrap (else the client would fetch the same records again at once)."""
        pending: list[DekPending] | None = call.context.state.get(PENDING)
        if not pending:
            return
        pending[:] = [p for p in pending if not p.future.done()]
        if pending:
            first = pending[0]
            del pending[0]
            call.wait_for(first.wait)

    def _clear_ok(self, call: RequestCall, name: str, topic: Any) -> bool:
        for partition in topic.partition_data:
            if partition.records is None:
                continue
            try:
                refuse_envelopes(bytes(partition.records))
            except RecordsError as exc:
                self._refuse(call, f"records for {name!r} refused: {exc}")
                return False
            except Exception as exc:
                self._refuse(call, f"records for {name!r} refused", exc)
                return False
        return True

    @staticmethod
    def _refuse(call: RequestCall, reason: str, unexpected: Exception | None = None) -> None:
        """Refuse the whole Produce with INVALID_RECORD; ``unexpected``: an error of the
        gateway's own (its type is logged, never its text: it may quote record bytes)."""
        if unexpected is not None:
            reason = f"{reason}: internal error ({type(unexpected).__name__})"
        call.context.log.warning(
            "produce refused: %s",
            reason,
            extra={"event": "encryption_refused", "principal": call.context.principal},
        )
        call.reject(ErrorCode.invalid_record, reason)

    # -- Fetch -----------------------------------------------------------------------

    def on_response(self, call: ResponseCall) -> None:
        if call.api_key == PRODUCE:
            if self.policies.seals_batches(call.context.tenant):
                self._explain_keyless(call)
            return
        if call.api_key == METADATA:
            for entry in call.body.topics:
                topic_id = getattr(entry, "topic_id", None)
                if topic_id is not None and entry.name is not None:
                    self.topic_names[topic_id] = entry.name
            return
        if call.api_key != FETCH:
            return
        body = call.body
        responses = []
        changed = False
        for topic in body.responses:
            name = self._name_of(topic, "topic")
            if name is not None and not self.policies.any_covers(name):
                responses.append(topic)
                continue
            partitions = []
            touched = False
            for partition in topic.partitions:
                if name is None:  # an id not seen in Metadata: the client refreshes
                    fixed = dataclasses.replace(
                        partition, error_code=ErrorCode.unknown_topic_id, records=b""
                    )
                else:
                    fixed = self._decrypt(call, name, partition)
                touched = touched or fixed is not partition
                partitions.append(fixed)
            if touched:
                topic = dataclasses.replace(topic, partitions=tuple(partitions))
                changed = True
            responses.append(topic)
        if changed:
            call.evolve(responses=tuple(responses))

    def _explain_keyless(self, call: ResponseCall) -> None:
        """A compacted topic refuses a batch sealed whole (its envelope record has no
        key): the broker's answer says so in terms of records the client never wrote,
        so the partition's error message says what to change."""
        topics = []
        changed = False
        for topic in call.body.responses:
            name = self._name_of(topic, "name")
            rule = None if name is None else self.policies.rule(call.context.tenant, name)
            parts = []
            for part in topic.partition_responses:
                if rule is not None and rule.batch and _keyless_refusal(part):
                    reason = (
                        f"topic {name!r} is compacted: its records need keys, and the "
                        "encryption policy seals whole batches (granularity: batch, no "
                        "key); it needs granularity: record"
                    )
                    call.context.log.warning(
                        "produce refused by the broker: %s",
                        reason,
                        extra={"event": "encryption_refused", "principal": call.context.principal},
                    )
                    part = dataclasses.replace(part, error_message=reason)
                    changed = True
                parts.append(part)
            topics.append(dataclasses.replace(topic, partition_responses=tuple(parts)))
        if changed:
            call.evolve(responses=tuple(topics))

    def _decrypt(self, call: ResponseCall, topic: str, partition: Any) -> Any:
        records = partition.records
        if not records:
            return partition
        try:
            opened = decrypt_records(bytes(records), topic, self.deks)
        except DekPending as pending:  # no records this time: the client fetches again
            waits: list[DekPending] = call.context.state.setdefault(PENDING, [])
            if len(waits) < MAX_WAITS:
                waits.append(pending)
            return dataclasses.replace(partition, records=b"")
        except (RecordsError, KmsError) as exc:
            reason = str(exc)
        except Exception as exc:  # never ciphertext as data, never a closed connection
            reason = f"internal error ({type(exc).__name__})"
        else:
            if opened == records:
                return partition
            return dataclasses.replace(partition, records=opened)
        call.context.log.error(
            "fetch of %s-%d cannot be decrypted: %s",
            topic,
            partition.partition_index,
            reason,
            extra={"event": "decryption_failed", "principal": call.context.principal},
        )
        return dataclasses.replace(partition, error_code=ErrorCode.corrupt_message, records=b"")

    def _name_of(self, topic: Any, field: str) -> str | None:
        """A Produce/Fetch topic entry's name: its own, or its id's (None: unknown id)."""
        name = getattr(topic, field, None)
        if name is not None:
            return str(name)
        return self.topic_names.get(getattr(topic, "topic_id", None))


def _keyless_refusal(part: Any) -> bool:
    """A Produce partition answer (v8+) refusing records for having no key."""
    if part.error_code != ErrorCode.invalid_record or not hasattr(part, "error_message"):
        return False
    texts = [part.error_message or ""]
    texts += [e.batch_index_error_message or "" for e in part.record_errors]
    return any("without key" in text for text in texts)


def _errors(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
    )
