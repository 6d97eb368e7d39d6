"""Kafka's DescribeClientQuotas / AlterClientQuotas mapped onto the gateway's quota store.

So that ``kafka-configs.sh --bootstrap-server <gateway> --entity-type users ...``
reads and changes the gateway's quotas. Entities map one to one onto targets:

======================  =====================================
Kafka entity            gateway target
======================  =====================================
``user`` = alice        ``principal:User:alice``
``client-id`` = k1      ``api-key:k1`` (the API key id)
``ip`` = 10.0.0.7       ``ip:10.0.0.7`` (connection limits)
``tenant`` = acme       ``tenant:acme`` (a gateway extension)
======================  =====================================

Keys: ``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage`` (read
as requests per second: the gateway has no broker threads to measure),
``controller_mutation_rate`` and ``connection_creation_rate``, plus the
gateway's own keys (bursts, ``max_connections``). Default entities and
combinations (user + client-id) are refused: the gateway's defaults are plans.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .model import InvalidQuotaError, QuotaSettings, Target, TargetType, check_values
from .store import QuotaStore, StoreError

NONE = 0
UNKNOWN_SERVER_ERROR = -1
INVALID_REQUEST = 42
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

KAFKA_KEYS = {
    "producer_byte_rate": "produce_bytes",
    "consumer_byte_rate": "fetch_bytes",
    "request_percentage": "requests",
    "controller_mutation_rate": "mutations",
    "connection_creation_rate": "connection_rate",
}
TO_KAFKA = {gateway: kafka for kafka, gateway in KAFKA_KEYS.items()}
ENTITY_TYPES = {
    "user": TargetType.PRINCIPAL,
    "client-id": TargetType.API_KEY,
    "ip": TargetType.ADDRESS,
    "tenant": TargetType.TENANT,
}
USER_PREFIX = "User:"

Entity = tuple[tuple[str, str | None], ...]  # ((entity_type, entity_name or None), ...)


@dataclass(frozen=True, slots=True)
class FilterComponent:
    entity_type: str
    match_type: int  # 0 exact name, 1 default name, 2 any specified name
    match: str | None = None


@dataclass(frozen=True, slots=True)
class QuotaOp:
    key: str
    value: float
    remove: bool = False


AlterEntry = tuple[Entity, Sequence[QuotaOp]]


@dataclass(frozen=True, slots=True)
class DescribedEntry:
    entity: Entity
    values: dict[str, float]  # Kafka's key names where Kafka has one


class ClientQuotaError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _invalid(message: str) -> ClientQuotaError:
    return ClientQuotaError(INVALID_REQUEST, message)


def entity_target(entity: Entity) -> Target:
    """The target a Kafka quota entity names; ``ClientQuotaError`` when it names none."""
    if not entity:
        raise _invalid("the quota entity is empty")
    if len(entity) > 1:
        raise _invalid(
            "the gateway keeps quotas per user, client-id (API key), ip or tenant, "
            "not for combinations of them"
        )
    entity_type, name = entity[0]
    target_type = ENTITY_TYPES.get(entity_type)
    if target_type is None:
        raise _invalid(f"unknown quota entity type {entity_type!r}")
    if name is None:
        raise _invalid(
            f"default {entity_type} quotas are plans in the gateway (kgw quota plan); "
            "name the entity"
        )
    if not name:
        raise _invalid(f"empty {entity_type} name")
    if target_type is TargetType.PRINCIPAL:
        return Target(target_type, USER_PREFIX + name)
    return Target(target_type, name)


def target_entity(target: Target) -> Entity | None:
    """The Kafka entity for a target; None for principals Kafka cannot name (not ``User:``)."""
    if target.type is TargetType.PRINCIPAL:
        if not target.name.startswith(USER_PREFIX):
            return None
        return (("user", target.name[len(USER_PREFIX) :]),)
    kafka_type = next(k for k, v in ENTITY_TYPES.items() if v is target.type)
    return ((kafka_type, target.name),)


def gateway_key(key: str) -> str:
    return KAFKA_KEYS.get(key, key)


def kafka_key(key: str) -> str:
    return TO_KAFKA.get(key, key)


def describe_client_quotas(
    settings: QuotaSettings, components: Sequence[FilterComponent], strict: bool
) -> list[DescribedEntry]:
    """Kafka's DescribeClientQuotas over the explicit values (plans are not entities).

    ``ClientQuotaError`` for a malformed filter (the whole response's error)."""
    wanted: dict[str, FilterComponent] = {}
    for component in components:
        if component.entity_type not in ENTITY_TYPES:
            raise _invalid(f"unknown quota entity type {component.entity_type!r}")
        if component.entity_type in wanted:
            raise _invalid(f"duplicate filter component for {component.entity_type!r}")
        if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise _invalid(f"unknown match type {component.match_type}")
        if component.match_type == MATCH_EXACT and component.match is None:
            raise _invalid("an exact match needs a name")
        wanted[component.entity_type] = component
    entries = []
    for target in sorted(settings.quotas, key=str):
        entity = target_entity(target)
        if entity is None or not _matches(entity, wanted, strict):
            continue
        values = {kafka_key(k): v for k, v in sorted(settings.quotas[target].items())}
        entries.append(DescribedEntry(entity, values))
    return entries


def _matches(entity: Entity, wanted: dict[str, FilterComponent], strict: bool) -> bool:
    names = dict(entity)
    if strict and set(names) != set(wanted):
        return False
    for entity_type, component in wanted.items():
        if entity_type not in names:
            return False
        name = names[entity_type]
        if component.match_type == MATCH_EXACT and name != component.match:
            return False
        if component.match_type == MATCH_DEFAULT and name is not None:
            return False
        if component.match_type == MATCH_SPECIFIED and name is None:
            return False
    return True


def alter_client_quotas(
    store: QuotaStore, entries: Sequence[AlterEntry], actor: str, validate_only: bool = False
) -> list[tuple[Entity, int, str | None]]:
    """Kafka's AlterClientQuotas: ``(entity, error_code, message)`` per entry. Blocking
    I/O (the store); changes reach the store's hooks for the audit trail."""
    results: list[tuple[Entity, int, str | None]] = []
    for entity, ops in entries:
        try:
            target = entity_target(entity)
            values = _values(target, ops)
            if not validate_only:
                store.set_values(target, values, actor)
        except ClientQuotaError as exc:
            results.append((entity, exc.code, exc.message))
        except InvalidQuotaError as exc:
            results.append((entity, INVALID_REQUEST, str(exc)))
        except StoreError as exc:
            results.append((entity, UNKNOWN_SERVER_ERROR, str(exc)))
        else:
            results.append((entity, NONE, None))
    return results


def _values(target: Target, ops: Sequence[QuotaOp]) -> dict[str, float | None]:
    values: dict[str, float | None] = {}
    named: dict[str, str] = {}  # gateway key -> the key as the client sent it
    for op in ops:
        key = gateway_key(op.key)
        if key in values:
            raise _invalid(f"{op.key} appears twice")
        values[key] = None if op.remove else op.value
        named[key] = op.key
    for key, value in values.items():
        try:
            check_values(target, {key: 1.0 if value is None else value})
        except InvalidQuotaError as exc:
            raise _invalid(f"{named[key]}{str(exc)[len(key) :]}") from None
    return values
