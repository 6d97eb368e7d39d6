"""SASL on one client connection, with no I/O: handshake, steps, lifetime (KIP-368).

The session hands SaslHandshake and SaslAuthenticate here. A step is async (the
mechanism may hash a secret in a thread), so ``begin`` returns the work for the
network layer to run and ``finish`` turns its ``Step`` into the response; the
response keeps its place in the connection's order meanwhile.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ..identity import ClientIdentity
from ..protocol.apis import ApiSpec, decodable_versions
from ..protocol.errors import build_entity
from .base import fail

if TYPE_CHECKING:
    from .base import ServerMechanism, Step
    from .server import SaslServer

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
SASL_APIS = (SASL_HANDSHAKE, SASL_AUTHENTICATE)
REAUTH_CHANGED = "reauth_changed_identity"  # the failure's reason (docs/sasl.md)
REAUTH_MESSAGE = "Authentication failed: re-authentication must keep principal and mechanism"


def sasl_specs() -> dict[int, ApiSpec]:
    """Handshake v1 only (v0 means the legacy unframed exchange); Authenticate as kio knows it."""
    handshake = max(decodable_versions(SASL_HANDSHAKE))
    authenticate = decodable_versions(SASL_AUTHENTICATE)
    return {
        SASL_HANDSHAKE: ApiSpec(SASL_HANDSHAKE, "sasl_handshake", 1, handshake),
        SASL_AUTHENTICATE: ApiSpec(
            SASL_AUTHENTICATE, "sasl_authenticate", min(authenticate), max(authenticate)
        ),
    }


def with_sasl_apis(base: Callable[[int], ApiSpec | None]) -> Callable[[int], ApiSpec | None]:
    """What a SASL listener advertises: ``base`` plus the SASL APIs (``sasl_specs``)."""
    specs = sasl_specs()

    def advertised(key: int) -> ApiSpec | None:
        return specs[key] if key in specs else base(key)

    return advertised


@dataclass(slots=True)
class PendingStep:
    """A SaslAuthenticate whose answer the network layer is computing."""

    mechanism: ServerMechanism
    auth_bytes: bytes
    api_version: int
    correlation_id: int


class Authentication:
    """Where one connection stands with SASL."""

    def __init__(
        self,
        server: SaslServer,
        identity: ClientIdentity,
        lifetime_s: float,
        keep_certificate_principal: bool = False,
        clock: Any = time.monotonic,
    ) -> None:
        self.server = server
        self.identity = identity
        self.lifetime_s = lifetime_s
        self.keep_certificate_principal = keep_certificate_principal
        self.clock = clock
        self.authenticated = False
        self.expiry: float | None = None
        self.principal: str | None = None  # the SASL principal, once authenticated
        self._mechanism: ServerMechanism | None = None
        self.last_failure: Step | None = None

    def expired(self) -> bool:
        return self.expiry is not None and self.clock() > self.expiry

    def handshake(self, request: Any, response_cls: type[Any]) -> tuple[Any, str | None]:
        """The SaslHandshake answer, and a refusal reason when the mechanism is not offered."""
        offered = self.server.mechanisms()
        base = build_entity(response_cls, ErrorCode.none)
        if request.mechanism not in offered:
            self._mechanism = None
            refused = f"mechanism {request.mechanism[:64]!r} is not enabled"
            return (
                type(base)(
                    error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=tuple(offered)
                ),
                refused,
            )
        self._mechanism = self.server.start(request.mechanism, self.identity.host)
        return type(base)(error_code=ErrorCode.none, mechanisms=tuple(offered)), None

    def begin(self, request: Any, version: int, correlation_id: int) -> PendingStep | None:
        """The step to run, or None when no handshake chose a mechanism."""
        if self._mechanism is None:
            return None
        return PendingStep(self._mechanism, bytes(request.auth_bytes), version, correlation_id)

    def screen(self, step: Step, mechanism: str) -> Step:
        """``step`` as this connection may take it: a re-authentication (KIP-368) that
        succeeds as another principal, or by another mechanism, is a failure, logged and
        counted as one with what it claimed (never as a login of either principal)."""
        if not step.succeeded or self.principal is None:
            return step
        if step.principal == self.principal and mechanism == self.identity.sasl_mechanism:
            return step
        claimed = step.claimed or step.api_key_id or step.principal
        return fail(REAUTH_CHANGED, claimed, REAUTH_MESSAGE)

    def finish(self, pending: PendingStep, step: Step, response_cls: type[Any]) -> Any:
        """The SaslAuthenticate response for ``step``; updates identity and lifetime."""
        mechanism = pending.mechanism.name
        if step.done and not step.succeeded:
            self.last_failure = step
            self._mechanism = None
            return self._response(response_cls, ErrorCode.sasl_authentication_failed, step.error)
        if not step.done:
            return self._response(response_cls, ErrorCode.none, None, step.challenge or b"")
        assert step.principal is not None
        same = self.principal is None or (
            step.principal == self.principal and mechanism == self.identity.sasl_mechanism
        )
        if not same:
            self.last_failure = step
            self._mechanism = None
            return self._response(
                response_cls, ErrorCode.sasl_authentication_failed, REAUTH_MESSAGE
            )
        self.authenticated = True
        self.principal = step.principal
        self._mechanism = None
        identity = self.identity
        if not (self.keep_certificate_principal and identity.cert_subject):
            identity.principal = step.principal
        identity.sasl_mechanism = mechanism
        identity.api_key_id = step.api_key_id
        identity.tenant = step.tenant
        lifetime_ms = self._lifetime_ms(step)
        self.expiry = None if lifetime_ms == 0 else self.clock() + lifetime_ms / 1000
        return self._response(
            response_cls, ErrorCode.none, None, step.challenge or b"", lifetime_ms
        )

    def _lifetime_ms(self, step: Step) -> int:
        configured = int(self.lifetime_s * 1000)
        candidates = [v for v in (configured, step.session_lifetime_ms) if v]
        return min(candidates) if candidates else 0

    @staticmethod
    def _response(
        response_cls: type[Any],
        code: ErrorCode,
        message: str | None,
        auth_bytes: bytes = b"",
        lifetime_ms: int = 0,
    ) -> Any:
        values: dict[str, Any] = {
            "error_code": code,
            "error_message": message,
            "auth_bytes": auth_bytes,
        }
        if "session_lifetime" in response_cls.__dataclass_fields__:
            values["session_lifetime"] = datetime.timedelta(milliseconds=lifetime_ms)
        return response_cls(**values)
