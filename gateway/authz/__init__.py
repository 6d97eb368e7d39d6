"""Authorization: Kafka's ACL semantics as a casbin model over the policy directory.

``model``: the vocabulary (resource types, operations, rules, filters, decisions).
``store``: the rules and role memberships in the policy files, changed by the CLI
and the Kafka ACL APIs. ``engine``: the cached, live-reloading ``Authorizer`` the
gateway asks on every request. See docs/authorization.md.
"""

from .engine import Authorizer
from .lint import Problem
from .model import (
    AclFilter,
    AclRule,
    Decision,
    InvalidRuleError,
    Operation,
    PatternFilter,
    PatternType,
    Permission,
    ResourceType,
)
from .policyfile import Membership
from .store import PolicyChange, PolicyError, PolicyStore

__all__ = [
    "AclFilter",
    "AclRule",
    "Authorizer",
    "Decision",
    "InvalidRuleError",
    "Membership",
    "Operation",
    "PatternFilter",
    "PatternType",
    "Permission",
    "PolicyChange",
    "PolicyError",
    "PolicyStore",
    "Problem",
    "ResourceType",
]
