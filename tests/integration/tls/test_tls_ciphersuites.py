"""``tls13_ciphersuites`` on a running gateway: ``openssl s_client`` offering only an
excluded TLS 1.3 suite is refused (``no_shared_cipher``), one offering an allowed
suite gets it, and a Kafka client on the same listener works throughout."""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka.admin import AdminClient

from gateway.devstack.gateway_proc import GatewayProcess

from .conftest import Pki, StartTls, tls_listener, tls_section, wait_for_event

pytestmark = pytest.mark.integration

ALLOWED = ["TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256"]


@pytest.fixture(scope="module")
def narrowed(start_tls_gateway: StartTls, pki: Pki) -> GatewayProcess:
    return start_tls_gateway(tls_listener(tls_section(pki, tls13_ciphersuites=ALLOWED)))


def s_client(gw: GatewayProcess, pki: Pki, suite: str) -> subprocess.CompletedProcess[str]:
    """One TLS 1.3 handshake by OpenSSL's own client, offering only ``suite``."""
    return subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{gw.listener['bootstrap_port']}",
         "-servername", "localhost", "-tls1_3", "-ciphersuites", suite,
         "-CAfile", str(pki.gateway.cert_path),
         "-cert", str(pki.cert(pki.tenant_a, "healthy")),
         "-key", str(pki.key(pki.tenant_a, "healthy"))],
        input="", capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


def test_an_excluded_suite_is_refused_and_an_allowed_one_served(
    narrowed: GatewayProcess, pki: Pki
) -> None:
    refused = s_client(narrowed, pki, "TLS_AES_256_GCM_SHA384")
    assert refused.returncode != 0, refused.stdout
    assert "handshake failure" in refused.stderr or "alert" in refused.stderr, refused.stderr
    record = wait_for_event(
        narrowed, "tls_handshake_failed", where=lambda r: r["reason"] == "no_shared_cipher"
    )
    assert record["listener"] == "mtls"

    for suite in ALLOWED:
        served = s_client(narrowed, pki, suite)
        assert served.returncode == 0, served.stderr
        assert f"Cipher is {suite}" in served.stdout, served.stdout
    established = wait_for_event(
        narrowed, "tls_established", where=lambda r: r["cipher"] == ALLOWED[1]
    )
    assert established["tls_version"] == "TLSv1.3"

    conf = {"bootstrap.servers": f"localhost:{narrowed.listener['bootstrap_port']}",
            **pki.confluent("healthy")}  # fmt: skip
    admin = AdminClient(conf)
    assert admin.list_topics(timeout=20).brokers
