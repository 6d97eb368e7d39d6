"""SASL/GSSAPI (Kerberos V5, RFC 4752), server side, with the ``gssapi`` package.

The exchange Kafka clients (Java's ``GssKrb5Client``, kafka-python, aiokafka,
librdkafka through Cyrus SASL) perform, one SaslAuthenticate each:

1. client: the AP-REQ token → server: ``accept_sec_context``'s output (the
   AP-REP, mutual authentication). Repeated while the context is incomplete.
2. client: an empty message → server: ``wrap`` (integrity only, no encryption)
   of 4 bytes: the security layers offered (``0x01``: none) and the largest
   message the server accepts (65536, as Kafka's broker sends). When the
   context completes with no output token, this is sent at once instead.
3. client: ``wrap`` of 4 bytes: the chosen layer (must be ``0x01``) and its
   own size, then the authorization id → server: an empty message. Done.

The authorization id is ignored, as Kafka ignores it (kafka-python and aiokafka
send the *service* name there); the principal is always the authenticated
Kerberos name mapped by the ``principal_to_local_rules``. The session lifetime
is the remaining lifetime of the client's service ticket. Accepting runs in a
worker thread (keytab and replay cache are files).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import gssapi
from gssapi.exceptions import GeneralError
from gssapi.raw.misc import GSSError

from .base import KERBEROS_FAILED, MALFORMED, Step, already_done, fail
from .kerberos_rules import NoMatchingRule, PrincipalMapper
from .settings import KerberosConfig

log = logging.getLogger("kgw.sasl")

LAYER_NONE = 0x01
SERVER_MAX_MESSAGE = 65536
MAX_TOKEN_BYTES = 64 * 1024
# krb5 error table: base -1765328384 (0x96c73a00); KRB5KRB_AP_ERR_TKT_EXPIRED is +32
_TICKET_EXPIRED = {0x96C73A20, 0x96C73A20 - (1 << 32)}
_GSS_ERRORS = (GSSError, GeneralError)


class KerberosSetupError(Exception):
    """The keytab or service principal cannot be used (start-up)."""


class KerberosAcceptor:
    """The gateway's service credentials and the principal mapping, shared by all
    exchanges of one process."""

    def __init__(self, config: KerberosConfig) -> None:
        keytab = config.keytab
        if not os.access(keytab, os.R_OK):
            raise KerberosSetupError(f"cannot read the keytab {keytab}")
        name = None
        if config.service_principal is not None:
            name = gssapi.Name(config.service_principal, gssapi.NameType.kerberos_principal)
        try:
            self.credentials = gssapi.Credentials(
                name=name, usage="accept", store={"keytab": str(keytab)}
            )
            self.credentials.inquire()
        except _GSS_ERRORS as exc:
            raise KerberosSetupError(
                f"cannot use the keytab {keytab} for "
                f"{config.service_principal or 'any principal'}: {exc}"
            ) from None
        self.mapper = PrincipalMapper(config.principal_to_local_rules, config.realm)

    def start(self) -> GssapiMechanism:
        return GssapiMechanism(self)


class GssapiMechanism:
    name = "GSSAPI"

    def __init__(self, acceptor: KerberosAcceptor) -> None:
        self._acceptor = acceptor
        self._context: gssapi.SecurityContext = gssapi.SecurityContext(
            creds=acceptor.credentials, usage="accept"
        )
        # raise at once instead of returning a KRB-ERROR token and raising on the next call:
        # a failure ends the exchange with a SASL error, as Kafka's broker does
        setattr(self._context, "__DEFER_STEP_ERRORS__", False)  # noqa: B010
        self._state = "accept"
        self._claimed: str | None = None

    async def step(self, client_bytes: bytes) -> Step:
        state, self._state = self._state, "done"
        if len(client_bytes) > MAX_TOKEN_BYTES:
            return fail("gssapi_token_too_long", self._claimed, MALFORMED)
        if state == "accept":
            return await self._accept(client_bytes)
        if state == "await_empty":
            if client_bytes:
                return fail("gssapi_unexpected_token", self._claimed, MALFORMED)
            return self._offer_layers()
        if state == "await_layer":
            return self._finish(client_bytes)
        return already_done()

    async def _accept(self, token: bytes) -> Step:
        if not token:
            return fail("gssapi_empty_token", None, MALFORMED)
        try:
            output = await asyncio.to_thread(self._context.step, token)
        except _GSS_ERRORS as exc:
            return fail(_reason(exc), None, KERBEROS_FAILED)
        if not self._context.complete:
            self._state = "accept"
            return Step(challenge=output or b"", done=False)
        try:
            self._claimed = str(self._context.initiator_name)
        except _GSS_ERRORS as exc:
            return fail(_reason(exc), None, KERBEROS_FAILED)
        if output:
            self._state = "await_empty"
            return Step(challenge=output, done=False, claimed=self._claimed)
        return self._offer_layers()

    def _offer_layers(self) -> Step:
        offer = bytes([LAYER_NONE]) + SERVER_MAX_MESSAGE.to_bytes(3, "big")
        try:
            wrapped = self._context.wrap(offer, False).message
        except _GSS_ERRORS as exc:
            return fail(_reason(exc), self._claimed, KERBEROS_FAILED)
        self._state = "await_layer"
        return Step(challenge=wrapped, done=False, claimed=self._claimed)

    def _finish(self, token: bytes) -> Step:
        claimed = self._claimed
        try:
            message = self._context.unwrap(token).message
        except _GSS_ERRORS as exc:
            return fail(_reason(exc), claimed, KERBEROS_FAILED)
        if len(message) < 4:
            return fail("gssapi_layer_reply", claimed, MALFORMED)
        if message[0] != LAYER_NONE:
            return fail("gssapi_security_layer", claimed, KERBEROS_FAILED)
        # message[4:] is the authorization id: ignored, as Kafka does
        assert claimed is not None
        try:
            principal = self._acceptor.mapper.principal(claimed)
            lifetime_s = self._context.lifetime
        except NoMatchingRule:
            return fail("no_matching_rule", claimed, KERBEROS_FAILED)
        except _GSS_ERRORS as exc:
            return fail(_reason(exc), claimed, KERBEROS_FAILED)
        if lifetime_s is not None and lifetime_s <= 0:
            return fail("ticket_expired", claimed, KERBEROS_FAILED)
        return Step(
            challenge=b"",
            done=True,
            principal=principal,
            claimed=claimed,
            session_lifetime_ms=None if lifetime_s is None else int(lifetime_s) * 1000,
        )


def _reason(exc: Any) -> str:
    """A log-safe category for a GSS failure (no names, no token bytes)."""
    minor = getattr(exc, "min_code", None)
    if minor in _TICKET_EXPIRED:
        return "ticket_expired"
    return "kerberos_error"
