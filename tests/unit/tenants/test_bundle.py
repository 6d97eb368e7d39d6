from __future__ import annotations

import json
import stat
from dataclasses import replace
from pathlib import Path

from gateway.tenants.bundle import BundleSpec, ClientCertificate, render, write

SPEC = BundleSpec(
    tenant="acme", plan="bronze", prefix="acme.", bootstrap="kafka.example.com:9093",
    tls=False, key_id="ak_1", secret='s3cr"et',
)  # fmt: skip


def test_plaintext_bundle_settings() -> None:
    files = render(SPEC)
    props = files["client.properties"]
    assert "security.protocol=SASL_PLAINTEXT" in props
    assert "bootstrap.servers=kafka.example.com:9093" in props
    assert 'username="ak_1" password="s3cr\\"et";' in props
    assert "ssl." not in props
    rdkafka = json.loads(files["confluent-kafka.json"])
    assert rdkafka["sasl.username"] == "ak_1" and rdkafka["sasl.password"] == 's3cr"et'
    python = json.loads(files["kafka-python.json"])
    assert python["sasl_plain_password"] == 's3cr"et'
    assert python["security_protocol"] == "SASL_PLAINTEXT"
    assert "s3cr" not in files["bundle.json"] and "s3cr" not in files["README.md"]
    assert "acme.orders" in files["README.md"]


def test_tls_bundle_with_client_certificate() -> None:
    cert = ClientCertificate("client.p12", "pw", "client.pem", "client.key")
    files = render(replace(SPEC, tls=True, server_ca="ca.pem", certificate=cert))
    props = files["client.properties"]
    assert "security.protocol=SASL_SSL" in props
    assert "ssl.truststore.type=PEM" in props and "ssl.truststore.location=ca.pem" in props
    assert "ssl.keystore.type=PKCS12" in props and "ssl.keystore.location=client.p12" in props
    python = json.loads(files["kafka-python.json"])
    assert python["ssl_cafile"] == "ca.pem" and python["ssl_certfile"] == "client.pem"
    assert json.loads(files["confluent-kafka.json"])["ssl.keystore.location"] == "client.p12"


def test_secret_files_are_owner_only(tmp_path: Path) -> None:
    target = tmp_path / "bundle"
    written = write(target, render(SPEC))
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in written}
    assert modes["client.properties"] == 0o600
    assert modes["kafka-python.json"] == 0o600
    assert modes["README.md"] == 0o644
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
