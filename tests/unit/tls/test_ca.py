"""The certificate authority behind ``kgw certs``, on temporary directories."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gateway.cli import main
from gateway.tls.ca import CaError, CertificateAuthority, parse_san, parse_subject


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def kgw(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["certs", *args])
    out = capsys.readouterr()
    text = out.out + out.err
    assert "PRIVATE KEY" not in text, "a private key was printed"
    return code, text


def test_full_cycle_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path)
    code, _ = kgw(capsys, "--dir", d, "init-ca", "acme", "--subject", "CN=Acme CA,O=Acme")
    assert code == 0
    ca_dir = tmp_path / "acme"
    assert mode(ca_dir / "ca.key") == 0o600 and mode(ca_dir) == 0o700
    assert (ca_dir / "crl.pem").is_file()

    code, _ = kgw(capsys, "--dir", d, "client", "acme", "pay-app", "--subject",
                  "CN=pay-app,OU=payments,O=Acme", "--san", "URI:spiffe://acme/pay")  # fmt: skip
    assert code == 0
    cert = x509.load_pem_x509_certificates((ca_dir / "issued/pay-app.pem").read_bytes())
    assert len(cert) == 2, "certificate followed by its CA"
    leaf = cert[0]
    assert leaf.subject.rfc4514_string() == "CN=pay-app,OU=payments,O=Acme"
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert mode(ca_dir / "issued/pay-app.key") == 0o600

    code, text = kgw(capsys, "--dir", d, "client", "acme", "pay-app")
    assert code == 2 and "already issued" in text

    code, text = kgw(capsys, "--dir", d, "server", "acme", "gw", "--san", "kafka.example.com",
                     "--san", "10.0.0.1", "--also-client")  # fmt: skip
    assert code == 0 and "DNS:kafka.example.com, IP:10.0.0.1" in text
    code, text = kgw(capsys, "--dir", d, "server", "acme", "nosan")
    assert code == 2 and "at least one SAN" in text

    pw = tmp_path / "p12.pass"
    code, text = kgw(capsys, "--dir", d, "export", "acme", "pay-app", "--password-file", str(pw))
    assert code == 0 and mode(pw) == 0o600 and mode(ca_dir / "issued/pay-app.p12") == 0o600
    password = pw.read_bytes().strip()
    assert password.decode() not in text, "the password was printed"
    bundle = pkcs12.load_pkcs12((ca_dir / "issued/pay-app.p12").read_bytes(), password)
    assert bundle.key is not None and bundle.cert is not None
    assert bundle.cert.certificate == leaf and len(bundle.additional_certs) == 1

    trust = tmp_path / "trust.p12"
    tpw = tmp_path / "trust.pass"
    code, _ = kgw(capsys, "--dir", d, "truststore", "acme", "--out", str(trust),
                  "--password-file", str(tpw))  # fmt: skip
    assert code == 0
    store = pkcs12.load_pkcs12(trust.read_bytes(), tpw.read_bytes().strip())
    assert [c.certificate.subject.rfc4514_string() for c in store.additional_certs] == [
        "CN=Acme CA,O=Acme"
    ]

    code, _ = kgw(capsys, "--dir", d, "revoke", "acme", "pay-app", "--reason", "key_compromise")
    assert code == 0
    code, text = kgw(capsys, "--dir", d, "export", "acme", "pay-app", "--password-file", str(pw))
    assert code != 0 and "was revoked" in text  # no keystore of a revoked certificate
    crl = x509.load_pem_x509_crl((ca_dir / "crl.pem").read_bytes())
    revoked = crl.get_revoked_certificate_by_serial_number(leaf.serial_number)
    assert revoked is not None
    assert revoked.extensions.get_extension_for_class(x509.CRLReason).value.reason == (
        x509.ReasonFlags.key_compromise
    )
    assert crl.is_signature_valid(CertificateAuthority(ca_dir).certificate.public_key())  # type: ignore[arg-type]

    code, text = kgw(capsys, "--dir", d, "list")
    assert code == 0
    lines = {line.split()[1]: line for line in text.splitlines()[1:]}
    assert "revoked" in lines["pay-app"] and "valid" in lines["gw"]

    code, text = kgw(capsys, "--dir", d, "expiring", "--within-days", "30")
    assert code == 0 and "nothing expires" in text  # a fresh CRL (30 days) is not due
    code, text = kgw(capsys, "--dir", d, "expiring", "--crl-within-days", "30")
    assert code == 1 and "CRL" in text  # the CRL's next update is 30 days out
    code, text = kgw(capsys, "--dir", d, "expiring", "--within-days", "3")
    assert code == 0 and "nothing expires" in text

    # the name can be reused once revoked; the old files are kept aside
    code, _ = kgw(capsys, "--dir", d, "client", "acme", "pay-app")
    assert code == 0
    assert list((ca_dir / "issued").glob("pay-app.revoked-*.pem"))


def test_csr_is_signed_without_seeing_the_key(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca", parse_subject("CN=CA"))
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "from-csr")]))
        .sign(key, hashes.SHA256())
    )
    entry = ca.issue("csr-app", "client", csr.subject, csr=csr)
    assert entry.key is None and entry.subject == "CN=from-csr"
    cert = x509.load_pem_x509_certificates((ca.dir / entry.cert).read_bytes())[0]
    assert cert.public_key() == key.public_key()
    with pytest.raises(CaError, match="issued from a CSR"):
        ca.export_pkcs12("csr-app", tmp_path / "x.p12", b"pw")


def test_encrypted_ca_key_needs_its_passphrase(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca", parse_subject("CN=CA"), password=b"s3cret")
    assert b"ENCRYPTED" in ca.key_path.read_bytes()
    with pytest.raises(CaError, match="passphrase"):
        CertificateAuthority(tmp_path / "ca").issue("x", "client", parse_subject("CN=x"))
    ca.issue("x", "client", parse_subject("CN=x"))


def test_private_keys_are_never_overwritten(tmp_path: Path) -> None:
    CertificateAuthority.create(tmp_path / "ca", parse_subject("CN=CA"))
    with pytest.raises(CaError, match="already exists"):
        CertificateAuthority.create(tmp_path / "ca", parse_subject("CN=CA"))


@pytest.mark.parametrize(
    ("text", "kind"),
    [("kafka.example.com", x509.DNSName), ("*.kafka.test", x509.DNSName),
     ("127.0.0.1", x509.IPAddress), ("IP:::1", x509.IPAddress),
     ("URI:spiffe://a/b", x509.UniformResourceIdentifier), ("EMAIL:a@b.c", x509.RFC822Name)],
)  # fmt: skip
def test_san_parsing(text: str, kind: type) -> None:
    assert isinstance(parse_san(text), kind)


def test_bad_sans_and_subjects() -> None:
    with pytest.raises(CaError):
        parse_san("IP:not-an-ip")
    with pytest.raises(CaError):
        parse_san("bad host!")
    with pytest.raises(CaError):
        parse_subject("")


def test_server_sans_from_a_gateway_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "gw.yaml"
    config.write_text(
        "upstream: {bootstrap_servers: ['10.0.0.1:9092']}\n"
        "listeners:\n"
        "  - {name: a, bootstrap_port: 9092, broker_port_base: 9100,"
        " advertised_host: kafka.acme.test}\n"
        "  - name: s\n    bootstrap_port: 19443\n    advertised_host: bootstrap.kafka.acme.test\n"
        "    tls: {cert_file: x.pem, key_file: x.key}\n"
        "    sni: {broker_host: 'b{node_id}.kafka.acme.test'}\n"
    )
    d = str(tmp_path)
    kgw(capsys, "--dir", d, "init-ca", "gw")
    code, text = kgw(capsys, "--dir", d, "server", "gw", "gw1", "--config", str(config))
    assert code == 0, text
    assert "DNS:kafka.acme.test, DNS:bootstrap.kafka.acme.test, DNS:*.kafka.acme.test" in text


def test_a_csr_is_signed_with_the_subject_the_admin_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The subject is the client's principal: a tenant's request naming another tenant's
    (``OU=GLOBEX``) must not become one."""
    d = str(tmp_path)
    assert kgw(capsys, "--dir", d, "init-ca", "acme", "--subject", "CN=Acme CA")[0] == 0
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name.from_rfc4514_string("CN=Billing,OU=GLOBEX,O=Acme")
    csr = x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, hashes.SHA256())
    path = tmp_path / "app.csr"
    path.write_bytes(csr.public_bytes(serialization.Encoding.PEM))
    code, text = kgw(capsys, "--dir", d, "client", "acme", "app", "--csr", str(path))
    assert code != 0 and "--csr needs --subject" in text and "OU=GLOBEX" in text
    code, _ = kgw(capsys, "--dir", d, "client", "acme", "app", "--csr", str(path),
                  "--subject", "CN=billing,OU=acme")  # fmt: skip
    assert code == 0
    entry = CertificateAuthority(tmp_path / "acme").find("app")
    assert entry.subject == "CN=billing,OU=acme" and entry.key is None
