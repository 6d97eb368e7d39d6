"""Kafka's ACL vocabulary as typed values: resource types, patterns, operations, rules.

The enum values are Kafka's own wire codes (``AclResourceType``, ``PatternType``,
``AclOperation``, ``AclPermissionType``), so the ACL APIs convert with ``Enum(code)``.
Nothing here does I/O; ``rule_problems`` says what is wrong with a rule in words a
security admin can act on.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from dataclasses import dataclass

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
ANY_HOST = "*"
CLUSTER_NAME = "kafka-cluster"
_PRINCIPAL = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*:\S(?:.*\S)?$")
_TOPIC_CHARS = re.compile(r"^[A-Za-z0-9._-]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
TOPIC_MAX_LENGTH = 249


class ResourceType(enum.IntEnum):
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6


class PatternType(enum.IntEnum):
    LITERAL = 3
    PREFIXED = 4


class PatternFilter(enum.IntEnum):
    """Pattern types a filter may name: ``MATCH`` and ``ANY`` exist only in filters."""

    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    DENY = 2
    ALLOW = 3


# Kafka's StandardAuthorizerData: an ALLOW of any of these also allows the key.
IMPLIES_DESCRIBE = frozenset(
    {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
)
IMPLIES_DESCRIBE_CONFIGS = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})

# The operations Kafka checks on each resource type (others are accepted but never asked for).
MEANINGFUL_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset(
        {
            Operation.READ,
            Operation.WRITE,
            Operation.CREATE,
            Operation.DELETE,
            Operation.ALTER,
            Operation.DESCRIBE,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset(
        {
            Operation.READ,
            Operation.DELETE,
            Operation.DESCRIBE,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
        }
    ),
    ResourceType.CLUSTER: frozenset(
        {
            Operation.CREATE,
            Operation.ALTER,
            Operation.DESCRIBE,
            Operation.CLUSTER_ACTION,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
            Operation.IDEMPOTENT_WRITE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.DESCRIBE, Operation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({Operation.DESCRIBE}),
}


def granted_operations(operation: Operation) -> frozenset[Operation]:
    """Every operation an ALLOW of ``operation`` allows (implications included)."""
    if operation is Operation.ALL:
        return frozenset(Operation)
    granted = {operation}
    if operation in IMPLIES_DESCRIBE:
        granted.add(Operation.DESCRIBE)
    if operation in IMPLIES_DESCRIBE_CONFIGS:
        granted.add(Operation.DESCRIBE_CONFIGS)
    return frozenset(granted)


def denied_operations(operation: Operation) -> frozenset[Operation]:
    """Every operation a DENY of ``operation`` denies: ALL denies all, X denies X only."""
    return frozenset(Operation) if operation is Operation.ALL else frozenset({operation})


class InvalidRuleError(ValueError):
    """A rule or filter that cannot be stored; the message says why (Kafka's INVALID_REQUEST)."""


@dataclass(frozen=True, slots=True)
class AclRule:
    """One ACL: ``permission`` for ``principal`` to ``operation`` on a resource, from ``host``.

    ``principal`` is ``Type:name`` (``User:alice``, ``Role:tenant-a``, ``User:*`` for
    everyone). ``name`` is ``kafka-cluster`` for CLUSTER; ``*`` with LITERAL is the
    wildcard. ``host`` is ``*``, an IP address or a CIDR block (v4 or v6).
    """

    principal: str
    resource_type: ResourceType
    pattern_type: PatternType
    name: str
    operation: Operation
    host: str
    permission: Permission

    def __str__(self) -> str:
        pattern = "" if self.pattern_type is PatternType.LITERAL else " prefixed"
        return (
            f"{self.permission.name} {self.principal} to {self.operation.name} on "
            f"{self.resource_type.name}{pattern} {self.name!r} from host {self.host}"
        )

    @classmethod
    def from_kafka(
        cls,
        resource_type: int,
        name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission: int,
    ) -> AclRule:
        """A rule from CreateAcls' wire codes; ``InvalidRuleError`` says what Kafka would refuse."""
        try:
            rule = cls(
                principal=principal or "",
                resource_type=ResourceType(resource_type),
                pattern_type=PatternType(pattern_type),
                name=name or "",
                operation=Operation(operation),
                host=host or "",
                permission=Permission(permission),
            )
        except ValueError as exc:
            raise InvalidRuleError(f"invalid ACL binding: {exc}") from None
        problems = rule_problems(rule)
        if problems:
            raise InvalidRuleError("; ".join(problems))
        return rule


def _code_or_any(enum_cls: type[enum.IntEnum], code: int, what: str) -> enum.IntEnum | None:
    if code == 1:  # ANY
        return None
    try:
        return enum_cls(code)
    except ValueError:
        raise InvalidRuleError(f"unknown {what} code {code} in ACL filter") from None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Selects rules with Kafka's ``AclBindingFilter`` semantics; ``None`` means any.

    ``pattern_type`` MATCH with a ``name`` selects every rule that would apply to a
    resource of that name (the literal name, the ``*`` wildcard and matching
    prefixes); ANY with a name selects rules with exactly that name; LITERAL and
    PREFIXED select exactly that pattern.
    """

    principal: str | None = None
    resource_type: ResourceType | None = None
    pattern_type: PatternFilter | PatternType = PatternFilter.ANY
    name: str | None = None
    operation: Operation | None = None
    host: str | None = None
    permission: Permission | None = None

    def matches(self, rule: AclRule) -> bool:
        if self.principal is not None and self.principal != rule.principal:
            return False
        if self.host is not None and self.host != rule.host:
            return False
        if self.operation is not None and self.operation != rule.operation:
            return False
        if self.permission is not None and self.permission != rule.permission:
            return False
        if self.resource_type is not None and self.resource_type != rule.resource_type:
            return False
        pattern = int(self.pattern_type)
        if pattern not in (PatternFilter.ANY, PatternFilter.MATCH, rule.pattern_type):
            return False
        if self.name is None:
            return True
        if pattern in (PatternFilter.ANY, rule.pattern_type):
            return self.name == rule.name
        # MATCH: every pattern that applies to a resource called ``name``.
        if rule.pattern_type is PatternType.LITERAL:
            return rule.name in (self.name, WILDCARD)
        return self.name.startswith(rule.name)

    @classmethod
    def from_kafka(
        cls,
        resource_type: int,
        name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission: int,
    ) -> AclFilter:
        """A filter from DescribeAcls/DeleteAcls wire codes (1 = ANY, ``None`` strings = any)."""
        try:
            pattern: PatternFilter | PatternType = PatternFilter(pattern_type)
        except ValueError:
            raise InvalidRuleError(f"unknown pattern type code {pattern_type}") from None
        rtype = _code_or_any(ResourceType, resource_type, "resource type")
        op = _code_or_any(Operation, operation, "operation")
        perm = _code_or_any(Permission, permission, "permission")
        return cls(
            principal=principal,
            resource_type=ResourceType(rtype) if rtype is not None else None,
            pattern_type=pattern,
            name=name,
            operation=Operation(op) if op is not None else None,
            host=host,
            permission=Permission(perm) if perm is not None else None,
        )


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer to one check. ``rule`` says in words what decided; ``acl`` is that rule."""

    allowed: bool
    rule: str
    acl: AclRule | None = None


SUPER_USER = "super user"
DEFAULT_DENY = "no matching allow rule (deny by default)"


def principal_problem(principal: str) -> str | None:
    if not _PRINCIPAL.match(principal):
        return f"principal {principal!r} is not Type:name (e.g. User:alice, Role:tenant-a)"
    return None


def parse_host(host: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The network a rule's host stands for; ``None`` for ``*``. ``ValueError`` if neither."""
    if host == ANY_HOST:
        return None
    if "/" in host:
        try:
            return ipaddress.ip_network(host, strict=True)
        except ValueError:
            loose = ipaddress.ip_network(host, strict=False)  # raises when not a CIDR at all
            raise ValueError(f"CIDR {host!r} has host bits set; did you mean {loose}?") from None
    address = ipaddress.ip_address(host)
    return ipaddress.ip_network(address)


def host_problem(host: str) -> str | None:
    try:
        parse_host(host)
    except ValueError as exc:
        text = str(exc)
        if "host bits" in text:
            return text
        return f"host {host!r} is not '*', an IP address or a CIDR block"
    return None


def rule_problems(rule: AclRule) -> list[str]:
    """Why ``rule`` cannot be stored (empty when it can): Kafka's own checks plus ours."""
    problems = []
    principal = principal_problem(rule.principal)
    if principal:
        problems.append(principal)
    host = host_problem(rule.host)
    if host:
        problems.append(host)
    if not rule.name:
        problems.append("resource name must not be empty")
    elif _CONTROL.search(rule.name):
        problems.append("resource name must not contain line breaks or control characters")
    if rule.resource_type is ResourceType.CLUSTER and (
        rule.name != CLUSTER_NAME or rule.pattern_type is not PatternType.LITERAL
    ):
        problems.append(f"the only valid CLUSTER resource is LITERAL {CLUSTER_NAME!r}")
    return problems


def rule_warnings(rule: AclRule) -> list[str]:
    """Legal but probably not what the admin meant."""
    warnings = []
    if rule.operation is not Operation.ALL and rule.operation not in MEANINGFUL_OPERATIONS.get(
        rule.resource_type, frozenset()
    ):
        warnings.append(
            f"{rule.operation.name} is never checked on {rule.resource_type.name}; "
            "the rule has no effect"
        )
    if rule.pattern_type is PatternType.PREFIXED and rule.name == WILDCARD:
        warnings.append("PREFIXED '*' matches only names starting with '*'; use LITERAL '*'")
    is_topic = rule.resource_type is ResourceType.TOPIC and rule.name != WILDCARD
    if is_topic and (not _TOPIC_CHARS.match(rule.name) or len(rule.name) > TOPIC_MAX_LENGTH):
        warnings.append(f"{rule.name!r} can never be a topic name (letters, digits, . _ -)")
    return warnings
