"""Server-side TLS as a sans-IO layer (mitmproxy style): ciphertext in, plaintext out.

``ServerTls`` wraps an ``ssl.SSLObject`` over two memory BIOs. The network
layer feeds it the socket's bytes and writes out ``data_to_send()``; nothing
is decrypted for the application before the handshake has completed, and a
failed handshake raises ``HandshakeFailed`` with a short, stable ``reason``
(``unknown_ca``, ``cert_expired``, ``not_tls``…) for the log line.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from cryptography import x509

READ_SIZE = 1024 * 1024
_READ_VIEW = memoryview(bytearray(READ_SIZE))
# Plaintext is encrypted this much at a time: the outgoing BIO and the ciphertext
# handed to the socket stay this small (a multi-megabyte Fetch response would
# otherwise be copied into fresh multi-megabyte blocks twice, each page faulted in).
WRITE_SLICE = 256 * 1024
TLS_HANDSHAKE = 0x16

# OpenSSL X509_V_ERR_* codes -> our reasons
_VERIFY_REASONS = {
    2: "unknown_ca",  # unable to get issuer certificate
    3: "crl_missing",  # unable to get certificate CRL
    7: "bad_signature",
    9: "cert_not_yet_valid",
    10: "cert_expired",
    11: "crl_not_yet_valid",
    12: "crl_expired",
    18: "unknown_ca",  # self-signed leaf
    19: "unknown_ca",  # self-signed certificate in chain
    20: "unknown_ca",  # unable to get local issuer certificate
    21: "unknown_ca",  # unable to verify the first certificate
    23: "cert_revoked",
    24: "invalid_ca",
    26: "wrong_purpose",
}

# OpenSSL SSL_R_* reasons (as Python reports them) -> our reasons
_SSL_REASONS = {
    "UNSUPPORTED_PROTOCOL": "protocol_version",
    "TLSV1_ALERT_PROTOCOL_VERSION": "protocol_version",
    "UNKNOWN_PROTOCOL": "protocol_version",
    "NO_PROTOCOLS_AVAILABLE": "protocol_version",
    "VERSION_TOO_LOW": "protocol_version",
    "NO_SHARED_CIPHER": "no_shared_cipher",
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": "no_client_cert",
    "TLSV1_ALERT_UNKNOWN_CA": "client_rejected_server_cert",
    "SSLV3_ALERT_BAD_CERTIFICATE": "client_rejected_server_cert",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": "client_rejected_server_cert",
    "TLSV1_ALERT_DECRYPT_ERROR": "client_rejected_server_cert",
    "HTTP_REQUEST": "not_tls",
    "HTTPS_PROXY_REQUEST": "not_tls",
}


class HandshakeFailed(Exception):
    """The TLS handshake was refused; ``reason`` is a short code, the message is for people."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class TlsError(Exception):
    """A TLS failure after the handshake (bad record, unexpected message)."""


@dataclass(frozen=True)
class Established:
    """What the handshake settled."""

    version: str
    cipher: str
    server_name: str | None
    peer_certificate: x509.Certificate | None


def classify(exc: ssl.SSLError, first_byte: int | None) -> tuple[str, str]:
    """A refusal's reason code and a human description."""
    if first_byte is not None and first_byte != TLS_HANDSHAKE:
        return "not_tls", f"not a TLS handshake (first byte 0x{first_byte:02x}; plaintext Kafka?)"
    if isinstance(exc, ssl.SSLCertVerificationError):
        code = int(exc.verify_code or 0)
        message = exc.verify_message or "certificate verify failed"
        return _VERIFY_REASONS.get(code, "cert_invalid"), f"client certificate refused: {message}"
    reason = str(exc.reason or "")
    if reason in _SSL_REASONS:
        return _SSL_REASONS[reason], f"{reason.lower().replace('_', ' ')}"
    if reason == "WRONG_VERSION_NUMBER":
        return "protocol_version", "wrong TLS version number"
    if reason.startswith(("TLSV1_ALERT_", "SSLV3_ALERT_")):
        return "client_alert", f"client sent alert: {reason.split('ALERT_', 1)[1].lower()}"
    return "tls_error", reason.lower().replace("_", " ") or str(exc)


class ServerTls:
    """One accepted connection's TLS state; no I/O.

    ``sni_check`` (optional) is asked about the client's server name during the
    handshake; returning False refuses it with ``unrecognized_name``.
    """

    def __init__(
        self,
        context: ssl.SSLContext,
        sni_check: Callable[[str | None], bool] | None = None,
    ) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._sni_check = sni_check
        self._sni_refused = False
        self.server_name: str | None = None
        self._obj = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._obj.kgw_layer = self  # type: ignore[attr-defined]  # found by on_sni
        self.established: Established | None = None
        self.first_byte: int | None = None
        self.peer_closed = False

    @property
    def ssl_object(self) -> ssl.SSLObject:
        return self._obj

    def receive(self, data: bytes) -> bytes | memoryview:
        """Feed bytes from the socket; return the plaintext now available (b"" while
        the handshake is running). Raises ``HandshakeFailed`` or ``TlsError``.

        Up to ``READ_SIZE`` bytes come back as a view into a buffer that every
        connection shares, valid only until the next ``receive``: the caller copies
        what it keeps (the frame reader does), which saves one copy of everything."""
        if data:
            if self.first_byte is None:
                self.first_byte = data[0]
                if self.first_byte != TLS_HANDSHAKE:
                    raise HandshakeFailed(*classify(ssl.SSLError("not TLS"), self.first_byte))
            self._incoming.write(data)
        if self.established is None and not self._handshake():
            return b""
        return self._read_all()

    def _handshake(self) -> bool:
        try:
            self._obj.do_handshake()
        except ssl.SSLWantReadError:
            return False
        except ssl.SSLError as exc:
            if self._sni_refused:
                raise HandshakeFailed(
                    "unknown_sni", f"no broker or bootstrap for server name {self.server_name!r}"
                ) from None
            raise HandshakeFailed(*classify(exc, self.first_byte)) from None
        der = self._obj.getpeercert(binary_form=True)
        cipher = self._obj.cipher()
        self.established = Established(
            version=self._obj.version() or "?",
            cipher=cipher[0] if cipher else "?",
            server_name=self.server_name,
            peer_certificate=x509.load_der_x509_certificate(der) if der else None,
        )
        return True

    def _read_all(self) -> bytes | memoryview:
        """Every decrypted byte available, read into one shared buffer (no per-record
        allocation; the event loop is single-threaded): a view of it when it all fit,
        else a copy."""
        view = _READ_VIEW
        chunks: list[bytes] = []
        pos = 0
        while True:
            if pos == len(view):
                chunks.append(bytes(view[:pos]))
                pos = 0
            try:
                # with a buffer, read() returns a count (typeshed says bytes)
                count = cast(int, self._obj.read(len(view) - pos, view[pos:]))
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                self.peer_closed = True
                break
            except ssl.SSLError as exc:
                raise TlsError(f"TLS error: {str(exc.reason or exc).lower()}") from None
            if not count:
                break
            pos += count
            if not self._incoming.pending and not self._obj.pending():
                break  # all consumed (no read-ahead): skip the read that would raise
        if not chunks:
            return view[:pos]
        chunks.append(bytes(view[:pos]))
        return b"".join(chunks)

    def eof_received(self) -> None:
        """The socket reached EOF; during the handshake that is a refusal by the client."""
        self._incoming.write_eof()
        if self.established is None:
            raise HandshakeFailed(
                "peer_closed", "client closed the connection during the handshake"
            )

    def send(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt ``data`` (any bytes-like object: nothing is copied before OpenSSL)."""
        if data:
            self._obj.write(data)

    def data_to_send(self) -> bytes:
        return self._outgoing.read() if self._outgoing.pending else b""

    def shutdown(self) -> None:
        """Queue a close_notify (best effort; the socket is closed right after)."""
        with contextlib.suppress(ssl.SSLError, ValueError):
            self._obj.unwrap()

    def _on_sni(self, server_name: str | None) -> int | None:
        self.server_name = server_name
        if self._sni_check is not None and not self._sni_check(server_name):
            self._sni_refused = True
            return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
        return None


def on_sni(obj: ssl.SSLObject, server_name: str | None, _context: ssl.SSLContext) -> int | None:
    """``SSLContext.sni_callback`` for server contexts used with ``ServerTls``."""
    layer = getattr(obj, "kgw_layer", None)
    if isinstance(layer, ServerTls):
        return layer._on_sni(server_name)
    return None
