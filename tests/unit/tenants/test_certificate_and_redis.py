"""``create --cert``: a client certificate and its PKCS#12 keystore in the bundle; the
tenant store in a real Redis (Debian's redis-server), as a fleet shares it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from gateway.config import load_config
from gateway.credentials import CredentialStoreConfig
from gateway.tenants import onboard
from gateway.tenants.model import Tenant
from gateway.tenants.store import open_tenant_store
from gateway.tenants.watch import TenantWatch
from gateway.tls.ca import CertificateAuthority, parse_subject

from ...redis_server import RedisServer
from .conftest import stores_for, write_config


async def test_create_with_a_client_certificate(tmp_path: Path) -> None:
    ca_dir = tmp_path / "tenant-ca"
    CertificateAuthority.create(ca_dir, parse_subject("CN=tenant CA"))
    tls = {"cert_file": str(tmp_path / "server.pem"), "key_file": str(tmp_path / "server.key")}
    listener = {
        "name": "tls", "bootstrap_port": 39092, "broker_port_base": 39100,
        "advertised_host": "kafka.example.com", "authentication": "sasl", "tls": tls,
    }  # fmt: skip
    path = write_config(tmp_path, listeners=[listener])
    server_ca = tmp_path / "gateway-ca.pem"
    server_ca.write_bytes((ca_dir / "ca.pem").read_bytes())
    out = tmp_path / "bundle"
    stores = stores_for(load_config(path))
    changes: list[tuple[str, str, str]] = []
    stores.record = lambda actor, action, target, before, after: changes.append(
        (actor, action, target)
    )
    created = await onboard.create(
        stores, "acme", "bronze", actor="test", bundle_dir=out,
        server_ca=server_ca, certificate=onboard.CertificateRequest(ca_dir),
    )  # fmt: skip
    (cert_name,) = created.tenant.certificates
    assert changes == [("test", "cert.issue", f"cert:tenant-ca/{cert_name}")]  # audited
    await onboard.delete(stores, "acme", actor="ops", delete_data=False, ca_dir=ca_dir)
    assert changes[-1] == ("ops", "cert.revoke", f"cert:tenant-ca/{cert_name}")
    props = (out / "client.properties").read_text()
    assert "security.protocol=SASL_SSL" in props
    password = next(
        line.split("=", 1)[1] for line in props.splitlines() if "keystore.password" in line
    )
    key, cert, _ = pkcs12.load_key_and_certificates(
        (out / "client.p12").read_bytes(), password.encode()
    )
    assert key is not None and cert is not None
    names = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    assert names[0].value == "acme.app"
    assert (out / "client.key").stat().st_mode & 0o077 == 0
    assert (out / "gateway-ca.pem").read_bytes() == server_ca.read_bytes()
    python = json.loads((out / "kafka-python.json").read_text())
    assert python["ssl_cafile"] == "gateway-ca.pem" and python["ssl_keyfile"] == "client.key"
    assert created.tenant.certificates and created.tenant.certificates[0].startswith("tenant-acme")


async def test_a_certificate_needs_a_tls_listener(tmp_path: Path) -> None:
    path = write_config(tmp_path)
    with pytest.raises(onboard.TenantError, match="no TLS"):
        await onboard.create(
            stores_for(load_config(path)), "acme", "bronze", actor="t", bundle_dir=None,
            certificate=onboard.CertificateRequest(tmp_path / "ca"),
        )  # fmt: skip


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


async def test_redis_tenant_store_and_watch(redis_url: str) -> None:
    config = CredentialStoreConfig(redis_url=redis_url, redis_prefix="kgw:test")
    store = open_tenant_store(config)
    acme = Tenant("acme", "bronze", "acme.", api_keys=("ak_1",))
    await store.put(acme, actor="t", action="tenant.create")
    await store.put(Tenant("globex", "bronze", "globex.", state="suspended"), actor="t", action="x")
    watch = TenantWatch(open_tenant_store(config))
    assert await watch.refresh() == frozenset({"globex"})
    assert await store.get("acme") == acme
    assert set(await store.all()) == {"acme", "globex"}
    assert await store.remove("globex", actor="t")
    assert await watch.refresh() == frozenset()
    await store.close()
    await watch.store.close()
