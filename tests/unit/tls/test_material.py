"""TLS material from disk: validation, and rotation that never takes bad material."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from gateway.tls.ca import CertificateAuthority, parse_san, parse_subject, utcnow
from gateway.tls.material import MaterialError, client_material, server_material
from gateway.tls.reloader import Reloadable
from gateway.tls.settings import ClientCaConfig, ListenerTlsConfig, UpstreamTlsConfig

from .conftest import DAY, Pki


def config(cert: Path, key: Path, pki: Pki, crl: Path | None = None) -> ListenerTlsConfig:
    return ListenerTlsConfig(
        cert_file=cert,
        key_file=key,
        client_auth="required",
        client_cas=[ClientCaConfig(ca_file=pki.tenant.cert_path, crl_file=crl)],
    )


def test_good_material_loads(pki: Pki) -> None:
    material = server_material(config(*pki.pair(pki.server, "gw"), pki, pki.tenant.crl_path))
    assert material.fingerprint and len(material.fingerprint) == 64
    assert material.not_after is not None and material.not_after > utcnow()


def test_key_not_matching_the_certificate(pki: Pki) -> None:
    cert, _ = pki.pair(pki.server, "gw")
    _, other_key = pki.pair(pki.tenant, "app")
    with pytest.raises(MaterialError, match="does not match"):
        server_material(config(cert, other_key, pki))


def test_expired_and_future_certificates(pki: Pki) -> None:
    with pytest.raises(MaterialError, match="expired on"):
        server_material(config(*pki.pair(pki.tenant, "expired"), pki))
    with pytest.raises(MaterialError, match="not valid before"):
        server_material(config(*pki.pair(pki.tenant, "future"), pki))


def test_unreadable_and_garbage_files(pki: Pki, tmp_path: Path) -> None:
    cert, key = pki.pair(pki.server, "gw")
    with pytest.raises(MaterialError, match="cannot read"):
        server_material(config(tmp_path / "missing.pem", key, pki))
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(MaterialError, match="no PEM certificate"):
        server_material(config(garbage, key, pki))
    with pytest.raises(MaterialError, match="cannot load the key"):
        server_material(config(cert, garbage, pki))


def test_crl_must_come_from_its_ca(pki: Pki) -> None:
    with pytest.raises(MaterialError, match="not this CA"):
        server_material(config(*pki.pair(pki.server, "gw"), pki, pki.rogue.crl_path))


def test_client_ca_must_be_a_ca(pki: Pki) -> None:
    cert, key = pki.pair(pki.server, "gw")
    bad = ListenerTlsConfig(
        cert_file=cert, key_file=key, client_auth="required",
        client_cas=[ClientCaConfig(ca_file=cert)],
    )  # fmt: skip
    with pytest.raises(MaterialError, match="is not a CA certificate"):
        server_material(bad)


def test_upstream_material(pki: Pki) -> None:
    cert, key = pki.pair(pki.tenant, "app")
    material = client_material(
        UpstreamTlsConfig(ca_files=[pki.server.cert_path], cert_file=cert, key_file=key)
    )
    assert material.context.check_hostname and material.fingerprint
    with pytest.raises(MaterialError, match="does not match"):
        client_material(
            UpstreamTlsConfig(
                ca_files=[pki.server.cert_path],
                cert_file=cert,
                key_file=pki.pair(pki.server, "gw")[1],
            )
        )


def test_rotation_keeps_previous_material_when_the_replacement_is_bad(
    pki: Pki, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    src_cert, src_key = pki.pair(pki.server, "gw")
    shutil.copy(src_cert, cert)
    shutil.copy(src_key, key)
    cfg = config(cert, key, pki)
    holder = Reloadable("test", cfg.files(), lambda: server_material(cfg), 0)
    first = holder.material
    assert not holder.check(), "nothing changed"

    caplog.set_level(logging.INFO, logger="kgw.tls")
    # key that does not match: rejected, previous material stays
    shutil.copy(pki.pair(pki.tenant, "app")[1], key)
    assert not holder.check()
    assert holder.material is first
    assert "does not match" in caplog.records[-1].getMessage()
    assert caplog.records[-1].__dict__["event"] == "tls_reload_rejected"

    # an expired certificate with its own key: rejected
    shutil.copy(pki.pair(pki.tenant, "expired")[0], cert)
    shutil.copy(pki.pair(pki.tenant, "expired")[1], key)
    assert not holder.check() and holder.material is first
    assert "expired on" in caplog.records[-1].getMessage()

    # unreadable (gone): rejected
    os.unlink(cert)
    assert not holder.reload("SIGHUP") and holder.material is first

    # a good new certificate: taken, with a new fingerprint
    entry = pki.server.issue(
        "gw-next", "server", parse_subject("CN=gateway"), [parse_san("localhost")]
    )
    shutil.copy(pki.server.dir / entry.cert, cert)
    shutil.copy(pki.server.dir / "issued" / "gw-next.key", key)
    assert holder.check()
    assert holder.material is not first and holder.material.fingerprint != first.fingerprint
    assert caplog.records[-1].__dict__["event"] == "tls_reloaded"
    assert holder.generation == 2


def test_expiring_material_is_reported(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca", parse_subject("CN=Short CA"))
    now = utcnow()
    ca.issue("soon", "server", parse_subject("CN=soon"), [parse_san("localhost")],
             not_before=now - DAY, not_after=now + 3 * DAY)  # fmt: skip
    cert, key = ca.dir / "issued" / "soon.pem", ca.dir / "issued" / "soon.key"
    material = server_material(ListenerTlsConfig(cert_file=cert, key_file=key))
    assert any("expires" in item for item in material.expiring)


def test_encrypted_key_needs_its_password_file_and_never_prompts(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca", parse_subject("CN=CA"))
    ca.issue("s", "server", parse_subject("CN=s"), [parse_san("localhost")], key_password=b"pw")
    cert, key = ca.dir / "issued" / "s.pem", ca.dir / "issued" / "s.key"
    with pytest.raises(MaterialError, match="bad format or passphrase"):
        server_material(ListenerTlsConfig(cert_file=cert, key_file=key))
    password = tmp_path / "pw"
    password.write_text("pw\n")
    material = server_material(
        ListenerTlsConfig(cert_file=cert, key_file=key, key_password_file=password)
    )
    assert material.fingerprint
