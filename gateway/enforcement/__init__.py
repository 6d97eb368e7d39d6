"""Authorization enforcement: every request checked before anything reaches a broker.

``Enforcer.decide`` runs the API's unit (``units.UNITS``) with a check bound to
the connection's principal and address; decisions come from the casbin
``Authorizer`` (cached per policy version). ``advertised`` narrows what
ApiVersions offers while authorization is on.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from ..authz.engine import Authorizer
from ..authz.model import Operation, ResourceType
from ..identity import ClientIdentity
from ..protocol.apis import ApiSpec, gateway_apis
from ..quotas.kafka_messages import CLIENT_QUOTA_APIS
from . import acl_admin
from .acl_admin import ACL_APIS
from .toolkit import CLUSTER_DENIED, deny_whole
from .units import AUTHZ_HIDDEN, AUTHZ_MAX_VERSION, UNITS
from .verdict import PASS, Verdict

log = logging.getLogger("kgw.authz")
LOCAL_APIS = ACL_APIS | CLIENT_QUOTA_APIS  # answered from the gateway's own stores


@functools.cache  # pure: asked on every request
def advertised(key: int) -> ApiSpec | None:
    """The gateway's range for ``key`` with authorization on (None: hidden)."""
    spec = gateway_apis().get(key)
    if spec is None or key in AUTHZ_HIDDEN or (key not in UNITS and key not in ACL_APIS):
        return None
    cap = AUTHZ_MAX_VERSION.get(key)
    if cap is not None and cap < spec.max_version:
        return ApiSpec(spec.key, spec.name, spec.min_version, cap)
    return spec


class Enforcer:
    """Binds the authorizer to one connection's identity."""

    __slots__ = (
        "authorizer", "brokers_decide", "identity", "last_denials", "last_denied", "last_rule",
    )  # fmt: skip
    advertised = staticmethod(advertised)

    def __init__(
        self, authorizer: Authorizer, identity: ClientIdentity, brokers_decide: bool = False
    ) -> None:
        """``brokers_decide`` (``authorization.gateway_checks: false``): only the APIs the
        gateway answers itself (``LOCAL_APIS``) are decided here; the brokers decide the
        rest through the tenant's own upstream principal (decision 0026). What is
        advertised stays the same."""
        self.authorizer = authorizer
        self.identity = identity
        self.brokers_decide = brokers_decide
        self.last_denials: list[str] = []
        self.last_denied: list[str] = []  # the last request's refused resources, "topic:<name>"
        self.last_rule: str | None = None  # the rule behind the first denial of the last request

    def check(self, resource_type: ResourceType, name: str, operation: Operation) -> bool:
        identity = self.identity
        decision = self.authorizer.authorize(
            identity.principal, identity.host, resource_type, name, operation
        )
        if not decision.allowed:
            if self.last_rule is None:
                self.last_rule = decision.rule
            self.last_denials.append(
                f"{operation.name} {resource_type.name}:{name}: {decision.rule}"
            )
            self.last_denied.append(f"{resource_type.name.lower()}:{name}")
        return decision.allowed

    def reader(self) -> Callable[[Any], bool] | None:
        """For one request: may the principal READ this topic? (Asks once per topic;
        a name that is not a string, a topic id, is never readable here.) None: the
        brokers decide."""
        self.last_denials = []
        self.last_denied = []
        self.last_rule = None
        if self.brokers_decide:
            return None
        answers: dict[str, bool] = {}

        def allowed(topic: object) -> bool:
            if not isinstance(topic, str):
                return False
            if topic not in answers:
                answers[topic] = self.check(ResourceType.TOPIC, topic, Operation.READ)
            return answers[topic]

        return allowed

    def decide(
        self, api_key: int, request: Any, response_cls: type[Any], scope: str | None = None
    ) -> Verdict:
        """``scope``: the namespace prefix of a namespaced tenant (the ACL APIs are
        answered inside it only, ``acl_admin``)."""
        self.last_denials = []
        self.last_denied = []
        self.last_rule = None
        if self.brokers_decide and api_key not in LOCAL_APIS:
            return PASS
        if api_key in ACL_APIS:
            actor = self.identity.principal
            return acl_admin.handle(
                api_key, request, response_cls, self.check, self.authorizer, actor, scope
            )
        if self.identity.principal in self.authorizer.super_users:
            return PASS  # Kafka's super.users: no ACL is consulted
        unit = UNITS.get(api_key)
        if unit is None:  # not in the mapping: denied
            self.last_denials.append(f"api {api_key} has no authorization unit")
            return deny_whole(response_cls, CLUSTER_DENIED, request)
        return unit(request, self.check, response_cls)
