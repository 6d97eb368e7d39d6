"""The gateway's SASL exchange with a broker, before any client frame is forwarded. No I/O.

``start()`` gives the first frame to send; ``on_frame(frame)`` takes each broker
response and returns the next frame, or ``None`` once authenticated. Failures
raise ``UpstreamAuthError`` with a message that names no secret.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from ..protocol.codec import ProtocolError, decode_response, encode_request
from ..protocol.framing import Frame
from .scram_client import ScramClient, UpstreamAuthError, plain_message

HANDSHAKE, AUTHENTICATE = 17, 36
_FIRST_ID = 2_000_000_000  # never clashes: no client frame is forwarded before we finish
CLIENT_ID = "kgw-gateway"


class UpstreamHandshake:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._username = username
        self._password = password
        self._scram = (
            ScramClient(mechanism, username, password) if mechanism.startswith("SCRAM") else None
        )
        self._step = 0
        self._correlation = _FIRST_ID
        self.done = False

    def _request(self, body: Any) -> bytes:
        self._correlation += 1
        key = int(body.__api_key__)
        return encode_request(key, int(body.__version__), self._correlation, CLIENT_ID, body)

    def start(self) -> bytes:
        return self._request(SaslHandshakeRequest(mechanism=self.mechanism))

    def on_frame(self, frame: Frame) -> bytes | None:
        payload = memoryview(frame)[4:]
        try:
            if self._step == 0:
                return self._after_handshake(
                    decode_response(payload, HANDSHAKE, 1, SaslHandshakeResponse)
                )
            response = decode_response(payload, AUTHENTICATE, 1, SaslAuthenticateResponse)
        except ProtocolError as exc:
            raise UpstreamAuthError(f"unreadable SASL response from the broker: {exc}") from None
        if response.error_code != ErrorCode.none:
            raise UpstreamAuthError(
                f"broker refused the gateway's credentials ({response.error_code.name}: "
                f"{response.error_message})"
            )
        return self._after_authenticate(response.auth_bytes)

    def _after_handshake(self, response: Any) -> bytes:
        if response.error_code != ErrorCode.none:
            offered = ", ".join(response.mechanisms)
            raise UpstreamAuthError(
                f"broker does not offer {self.mechanism} (it offers: {offered or 'nothing'})"
            )
        self._step = 1
        first = (
            self._scram.first() if self._scram else plain_message(self._username, self._password)
        )
        return self._request(SaslAuthenticateRequest(auth_bytes=first))

    def _after_authenticate(self, auth_bytes: bytes) -> bytes | None:
        if self._scram is None or self._step == 3:
            if self._scram is not None:
                self._scram.verify(auth_bytes)
            self.done = True
            return None
        if self._step == 1:
            self._step = 2
            return self._request(SaslAuthenticateRequest(auth_bytes=self._scram.final(auth_bytes)))
        self._scram.verify(auth_bytes)
        self.done = True
        return None
