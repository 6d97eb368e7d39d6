"""``tls13_ciphersuites``: TLS 1.3 suites narrowed on a listener, checked with real
handshakes over loopback sockets (OpenSSL on both sides), and refused at start-up
when a name is not a TLS 1.3 suite."""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Any

import pytest

from gateway.config import ConfigError, parse_config
from gateway.tls.ciphersuites import TLS13_SUITES, set_tls13_ciphersuites, tls13_ciphersuites
from gateway.tls.material import server_material
from gateway.tls.settings import ListenerTlsConfig

from .conftest import Pki

ALLOWED = "TLS_AES_128_GCM_SHA256"
EXCLUDED = "TLS_AES_256_GCM_SHA384"


def listener_tls(pki: Pki, **more: Any) -> ListenerTlsConfig:
    cert, key = pki.pair(pki.server, "gw")
    return ListenerTlsConfig(cert_file=cert, key_file=key, **more)


def client(pki: Pki, suite: str) -> ssl.SSLContext:
    """A TLS 1.3-only client offering exactly one suite."""
    context = ssl.create_default_context(cafile=str(pki.server.cert_path))
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    set_tls13_ciphersuites(context, [suite])
    assert tls13_ciphersuites(context) == [suite]  # the client really offers only this
    return context


def handshake(server: ssl.SSLContext, client_context: ssl.SSLContext) -> str:
    """A real handshake on a loopback socket: the suite both sides settled on, or the
    client's SSLError (the server's side is then an error too)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    served: list[BaseException | str] = []

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server.wrap_socket(conn, server_side=True) as tls:
                cipher = tls.cipher()
                served.append(cipher[0] if cipher else "?")
        except (ssl.SSLError, OSError) as exc:
            served.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            client_context.wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            cipher = tls.cipher()
            assert cipher is not None
            negotiated = cipher[0]
    except ssl.SSLError:
        thread.join(5)
        assert served and isinstance(served[0], ssl.SSLError), served
        raise
    finally:
        thread.join(5)
        listener.close()
    assert served == [negotiated]
    return negotiated


def test_an_allowed_suite_is_negotiated(pki: Pki) -> None:
    material = server_material(listener_tls(pki, tls13_ciphersuites=[ALLOWED]))
    assert tls13_ciphersuites(material.context) == [ALLOWED]
    assert handshake(material.context, client(pki, ALLOWED)) == ALLOWED


def test_a_client_offering_only_an_excluded_suite_fails(pki: Pki) -> None:
    narrowed = server_material(listener_tls(pki, tls13_ciphersuites=[ALLOWED]))
    with pytest.raises(ssl.SSLError, match=r"HANDSHAKE_FAILURE|NO_SHARED_CIPHER"):
        handshake(narrowed.context, client(pki, EXCLUDED))
    # without the option the same client is served: the narrowing is what refused it
    default = server_material(listener_tls(pki))
    assert handshake(default.context, client(pki, EXCLUDED)) == EXCLUDED


def test_order_of_preference_is_kept(pki: Pki) -> None:
    suites = ["TLS_CHACHA20_POLY1305_SHA256", ALLOWED]
    material = server_material(listener_tls(pki, tls13_ciphersuites=suites))
    assert tls13_ciphersuites(material.context) == suites
    assert set(suites) <= set(TLS13_SUITES)


@pytest.mark.parametrize(
    ("suites", "message"),
    [
        (
            ["TLS_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"],
            "'ECDHE-RSA-AES128-GCM-SHA256' is not a TLS 1.3",
        ),
        (["TLS_NOPE"], "'TLS_NOPE' is not a TLS 1.3"),
        ([], "at least one suite"),
        ([ALLOWED, ALLOWED], "listed twice"),
        ("TLS_AES_128_GCM_SHA256", "valid list"),
    ],
)
def test_bad_suites_are_a_config_error_naming_the_key(suites: Any, message: str) -> None:
    raw = {
        "upstream": {"bootstrap_servers": ["10.0.0.1:9092"]},
        "listeners": [{
            "name": "l", "bootstrap_port": 9093, "broker_port_base": 9100,
            "advertised_host": "kafka.test",
            "tls": {"cert_file": "s.pem", "key_file": "s.key", "tls13_ciphersuites": suites},
        }],
    }  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert "listeners.0.tls.tls13_ciphersuites" in str(caught.value)
    assert message in str(caught.value)
