"""What each client connection is made of: its session, built from the gateway's services.

The composition of one connection's per-request work (``Session``): authorization
(an ``Enforcer`` bound to the connection's identity), SASL, quotas and their admin
APIs, operators' filters, and fetch sessions bound to the connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..session import Session

if TYPE_CHECKING:
    from ..identity import ClientIdentity
    from .gateway import Gateway
    from .listeners import ListenerSet


def new_session(
    gateway: Gateway, listener: ListenerSet, identity: ClientIdentity, observe: bool
) -> Session:
    enforcer = None
    if gateway.policy is not None:
        from ..enforcement import Enforcer

        # checks off (gateway.authorizer None): the brokers decide, except on the APIs
        # the gateway answers from its own stores, which no broker ever sees
        brokers_decide = gateway.authorizer is None
        enforcer = Enforcer(gateway.policy, identity, brokers_decide=brokers_decide)
    auth = None
    config = gateway.config
    if listener.config.authentication == "sasl" and gateway.sasl_server is not None:
        from ..sasl.connection import Authentication

        auth = Authentication(
            gateway.sasl_server,
            identity,
            config.sasl.session_lifetime_s if config.sasl else 0,
            keep_certificate_principal=listener.config.principal_from == "certificate",
        )
    throttle = admin = None
    if gateway.quotas is not None:
        from ..quotas.admin import QuotaAdmin
        from ..quotas.throttle import Throttle

        throttle = Throttle(gateway.quotas, identity)
        topics = gateway.cluster_topics
        assert topics is not None
        admin = QuotaAdmin(gateway.quotas, identity, topics.fetch, topics.note)
    return Session(
        listener.public,
        identity,
        enforcer,
        auth,
        observe=observe,
        throttle=throttle,
        admin=admin,
        # tenants share broker ports: fetch sessions stay with their connection,
        # also when only the brokers decide (authorization.gateway_checks: false)
        bind_fetch_sessions=gateway.policy is not None,
        filters=gateway.filters.bind(identity) if gateway.filters else None,
    )
