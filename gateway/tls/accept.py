"""TLS on accepted client connections: the asyncio glue around ``layer.ServerTls``.

A TLS listener's protocol factory returns ``TlsServerProtocol(inner)``: it
receives the socket's bytes, runs the handshake with the listener's *current*
context (so a rotated certificate applies to the next connection), and only
once the handshake has completed and the client's identity is filled in
(TLS version, cipher, certificate subject, principal, and the broker chosen
by SNI) does it call ``inner.connection_made`` with a ``TlsTransport``.
Not a byte of a request reaches ``inner`` before that. A refused handshake
is one log line, ``event: tls_handshake_failed`` with a ``reason``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any, Protocol

from ..identity import ClientIdentity
from .layer import WRITE_SLICE, Established, HandshakeFailed, ServerTls, TlsError, on_sni
from .material import server_material
from .principal import NoPrincipal, parse_rules, principal_of
from .reloader import Reloadable
from .revocation import CertRef, revoked_among
from .settings import ListenerTlsConfig, SniConfig

log = logging.getLogger("kgw.tls")


class TlsInner(Protocol):
    """What the plaintext side (``runtime.client.ClientConnection``) offers."""

    conn_id: str
    identity: ClientIdentity
    node_id: int | None

    def connection_made(self, transport: asyncio.BaseTransport) -> None: ...
    def data_received(self, data: bytes | memoryview) -> None: ...  # a view: copy what you keep
    def eof_received(self) -> bool | None: ...
    def connection_lost(self, exc: Exception | None) -> None: ...
    def pause_writing(self) -> None: ...
    def resume_writing(self) -> None: ...
    def tls_done(self, reason: str | None) -> None: ...


class TlsAcceptor:
    """One TLS listener: its reloadable context, principal rules and SNI routing."""

    def __init__(
        self, listener: str, config: ListenerTlsConfig, sni: SniConfig | None, bootstrap_host: str
    ) -> None:
        self.listener = listener
        self.config = config
        self.sni = sni
        self.bootstrap_host = bootstrap_host.lower()
        self.rules = parse_rules(config.principal.rules)
        self.material = Reloadable(
            listener,
            config.files(),
            lambda: server_material(config),
            config.watch_interval_s,
            customize=self._customize,
        )

    @staticmethod
    def _customize(context: ssl.SSLContext) -> None:
        context.sni_callback = on_sni  # records the server name; refuses unknown ones in SNI mode

    def protocol(self, inner: TlsInner) -> TlsServerProtocol:
        return TlsServerProtocol(self, inner)

    def sni_allowed(self, server_name: str | None) -> bool:
        if self.sni is None or server_name is None:
            return True
        name = server_name.lower().rstrip(".")
        return name == self.bootstrap_host or self.sni.node_id(name) is not None

    def route(self, server_name: str | None) -> int | None:
        """SNI mode: the broker a server name stands for (None: the bootstrap)."""
        if self.sni is None or server_name is None:
            return None
        return self.sni.node_id(server_name)

    def principal(self, established: Established) -> str | None:
        """The principal from a verified client certificate (None: no certificate)."""
        cert = established.peer_certificate
        if cert is None:
            return None
        return principal_of(cert, self.config.principal.source, self.rules)


class TlsServerProtocol(asyncio.Protocol):
    """The raw socket's protocol while a TLS connection lives."""

    def __init__(self, acceptor: TlsAcceptor, inner: TlsInner) -> None:
        self.acceptor = acceptor
        self.inner = inner
        self.raw: asyncio.Transport | None = None
        self.tls: ServerTls | None = None
        self.app: TlsTransport | None = None
        self.peer = "?"
        self.done = False  # refused, timed out or lost
        self._generation = 0  # of the material the handshake runs with
        self._timer: asyncio.TimerHandle | None = None

    def _extra(self, event: str, **more: Any) -> dict[str, Any]:
        return {
            "event": event,
            "conn": self.inner.conn_id,
            "listener": self.acceptor.listener,
            "peer": self.peer,
            **more,
        }

    # -- raw socket callbacks ---------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = raw = transport  # type: ignore[assignment]  # uvloop's is no subclass
        peer = raw.get_extra_info("peername")
        if peer:
            self.peer = f"{peer[0]}:{peer[1]}"
        self._generation = self.acceptor.material.generation
        self.tls = ServerTls(self.acceptor.material.context, self.acceptor.sni_allowed)
        self._timer = asyncio.get_running_loop().call_later(
            self.acceptor.config.handshake_timeout_s, self._handshake_timeout
        )

    def data_received(self, data: bytes) -> None:
        tls = self.tls
        if tls is None or self.done:
            return
        try:
            plain = tls.receive(data)
        except HandshakeFailed as failed:
            self._refuse(failed.reason, failed.detail)
            return
        except TlsError as exc:
            self._flush()
            self._fail(str(exc))
            return
        self._flush()
        if self.app is None and (tls.established is None or not self._start_app(tls.established)):
            return
        if plain and self.app is not None and not self.app.is_closing():
            self.inner.data_received(plain)
        if tls.peer_closed and self.app is not None:
            self.inner.eof_received()
            self.app.close()

    def eof_received(self) -> bool | None:
        if self.app is not None:
            return self.inner.eof_received()
        if self.tls is not None and not self.done:
            try:
                self.tls.eof_received()
            except HandshakeFailed as failed:
                self._refuse(failed.reason, failed.detail)
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        if self.app is not None:
            self.app.closed = True
            self.inner.connection_lost(exc)
        elif not self.done:
            self.done = True
            self._log_refusal("peer_closed", "connection lost during the handshake")

    def pause_writing(self) -> None:
        if self.app is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.app is not None:
            self.inner.resume_writing()

    # -- handshake outcome --------------------------------------------------------

    def _start_app(self, established: Established) -> bool:
        self._cancel_timer()
        identity = self.inner.identity
        try:
            principal = self.acceptor.principal(established)
        except NoPrincipal as exc:
            self._refuse("principal_unmapped", str(exc))
            return False
        cert = established.peer_certificate
        ref = CertRef.of(cert) if cert is not None else None
        if ref is not None and self._revoked_meanwhile(ref):
            return False
        identity.tls_version = established.version
        identity.tls_cipher = established.cipher
        if ref is not None:
            identity.cert_subject, identity.cert_serial = ref.subject, ref.serial
            identity.cert_issuer = ref.issuer
        if principal is not None:
            identity.principal = principal
        if self.acceptor.sni is not None:
            self.inner.node_id = self.acceptor.route(established.server_name)
        log.info(
            "TLS established",
            extra=self._extra(
                "tls_established",
                tls_version=established.version,
                cipher=established.cipher,
                principal=identity.principal,
                subject=identity.cert_subject,
                sni=established.server_name,
                node_id=self.inner.node_id,
            ),
        )
        assert self.raw is not None and self.tls is not None
        self.app = TlsTransport(self.raw, self.tls, self.inner)
        self.inner.connection_made(self.app)
        if not self.app.is_closing():
            self.inner.tls_done(None)
        return True

    def _revoked_meanwhile(self, ref: CertRef) -> bool:
        """A CRL loaded while this handshake ran (with the previous context) revokes the
        certificate: refused as the handshake would have been, since the sweep of
        established connections at that reload could not see this one."""
        material = self.acceptor.material
        if material.generation == self._generation:
            return False
        if not revoked_among([ref], material.material.crls):
            return False
        self._refuse("cert_revoked", "client certificate refused: certificate revoked")
        return True

    def _refuse(self, reason: str, detail: str) -> None:
        self.done = True
        self._cancel_timer()
        self._flush()  # the alert, so that the client learns why
        self._log_refusal(reason, detail)
        if self.raw is not None:
            self.raw.close()

    def _log_refusal(self, reason: str, detail: str) -> None:
        quiet = reason == "peer_closed" and (self.tls is None or self.tls.first_byte is None)
        if not quiet:
            identity = self.inner.identity
            if self.raw is not None and not identity.host:
                peer = self.raw.get_extra_info("peername")
                if peer:
                    identity.host, identity.port = str(peer[0]), int(peer[1])
            self.inner.tls_done(reason)
        log.log(
            logging.DEBUG if quiet else logging.WARNING,
            "TLS handshake refused: %s",
            detail,
            extra=self._extra("tls_no_handshake" if quiet else "tls_handshake_failed",
                              reason=reason),
        )  # fmt: skip

    def _fail(self, detail: str) -> None:
        log.warning("TLS error: %s", detail, extra=self._extra("tls_error", reason="tls_error"))
        if self.app is not None:
            self.app.abort()
        elif self.raw is not None:
            self.done = True
            self.raw.abort()

    def _handshake_timeout(self) -> None:
        self._timer = None
        if self.app is None and not self.done:
            timeout = self.acceptor.config.handshake_timeout_s
            self.done = True
            self._log_refusal("handshake_timeout", f"handshake not finished within {timeout:g}s")
            if self.raw is not None:
                self.raw.abort()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _flush(self) -> None:
        if self.tls is None or self.raw is None:
            return
        out = self.tls.data_to_send()
        if out and not self.raw.is_closing():
            self.raw.write(out)


class TlsTransport(asyncio.Transport):
    """What ``inner`` writes to: plaintext in, TLS records out on the raw transport."""

    def __init__(self, raw: asyncio.Transport, tls: ServerTls, inner: TlsInner) -> None:
        super().__init__()
        self._raw = raw
        self._tls = tls
        self._inner = inner
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self._tls.ssl_object
        return self._raw.get_extra_info(name, default)

    def is_closing(self) -> bool:
        return self.closed or self._raw.is_closing()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._tls.shutdown()
        self._write_out()
        self._raw.close()

    def abort(self) -> None:
        self.closed = True
        self._raw.abort()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt and send ``data``, ``WRITE_SLICE`` bytes at a time (no copy of it)."""
        if self.closed:
            return
        size = len(data)
        if size <= WRITE_SLICE:
            self._tls.send(data)
            self._write_out()
            return
        view = memoryview(data)
        with view:
            for start in range(0, size, WRITE_SLICE):
                self._tls.send(view[start : start + WRITE_SLICE])
                self._write_out()

    def writelines(self, list_of_data: Any) -> None:
        """Small frames are joined into one write (fewer, fuller TLS records); a large
        one is written on its own, in slices, never copied into a joined buffer."""
        if isinstance(list_of_data, list) and len(list_of_data) == 1:  # the usual case
            self.write(list_of_data[0])
            return
        pending: list[bytes | bytearray | memoryview] = []
        pending_size = 0
        for data in list_of_data:
            if len(data) >= WRITE_SLICE:
                if pending:
                    self.write(b"".join(pending))
                    pending, pending_size = [], 0
                self.write(data)
                continue
            pending.append(data)
            pending_size += len(data)
            if pending_size >= WRITE_SLICE:
                self.write(b"".join(pending))
                pending, pending_size = [], 0
        if pending:
            self.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def _write_out(self) -> None:
        out = self._tls.data_to_send()
        if out and not self._raw.is_closing():
            self._raw.write(out)

    def can_write_eof(self) -> bool:
        return False

    def pause_reading(self) -> None:
        if not self._raw.is_closing():
            self._raw.pause_reading()

    def resume_reading(self) -> None:
        if not self._raw.is_closing():
            self._raw.resume_reading()

    def is_reading(self) -> bool:
        return self._raw.is_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._raw.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._raw.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._raw.get_write_buffer_limits()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        # By design: the protocol above a TLS connection is chosen once, at accept.
        raise RuntimeError("the plaintext protocol of a TLS connection cannot be replaced")

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._inner  # type: ignore[return-value]
