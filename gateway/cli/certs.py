"""``kgw certs``: the certificate authority for gateway and tenant certificates.

Each CA lives in its own directory under ``--dir`` (default ``certs``); see
``certs/README.md`` for the layout. Private keys are written 0600 and never
printed; passwords are read from files (``--password-file``), and a missing
password file is created with a random password, 0600.

``init-ca``, ``server``/``client``, ``revoke`` and ``crl`` are recorded in the
admin audit trail (``--audit-trail``; docs/audit.md) by what identifies each
certificate: subject, serial, SHA-256 fingerprint, validity; never a key.
"""

from __future__ import annotations

import argparse
import datetime
import secrets
import sys
from pathlib import Path
from typing import Any

from cryptography import x509

from ..audit import AuditError, certificate_json
from ..audit.admin import ChangeRecorder, add_audit_args, cli_actor
from ..tls.ca import (
    CaError,
    CertificateAuthority,
    Issued,
    find_cas,
    parse_san,
    parse_subject,
    utcnow,
    write_private,
)


def _secret(path: Path | None, create: bool = False) -> bytes | None:
    """A password from a file; with ``create``, a new random one written 0600."""
    if path is None:
        return None
    if not path.exists():
        if not create:
            raise CaError(f"{path}: no such password file")
        write_private(path, secrets.token_urlsafe(24).encode() + b"\n")
        print(f"wrote a new random password to {path} (mode 0600)")
    try:
        return path.read_bytes().rstrip(b"\r\n")
    except OSError as exc:
        raise CaError(f"{path}: cannot read: {exc.strerror}") from None


def _ca(args: argparse.Namespace) -> CertificateAuthority:
    return CertificateAuthority(args.dir / args.ca, _secret(args.ca_password_file))


def _csr(path: Path | None) -> x509.CertificateSigningRequest | None:
    if path is None:
        return None
    data = path.read_bytes()
    try:
        return x509.load_pem_x509_csr(data)
    except ValueError:
        try:
            return x509.load_der_x509_csr(data)
        except ValueError:
            raise CaError(f"{path}: not a PEM or DER certificate signing request") from None


def _record(args: argparse.Namespace, action: str, target: str, before: Any, after: Any) -> None:
    recorder: ChangeRecorder | None = getattr(args, "recorder", None)
    if recorder is not None:
        recorder.append(cli_actor(args), action, target, before, after)


def _described(ca: CertificateAuthority, entry: Issued) -> dict[str, Any]:
    """An issued certificate as the trail records it (the certificate file, if readable)."""
    described: dict[str, Any] = {
        "name": entry.name,
        "kind": entry.kind,
        "serial": entry.serial,
        "subject": entry.subject,
        "sans": list(entry.sans),
        "not_after": entry.not_after,
        "revoked_at": entry.revoked_at,
        "revocation_reason": entry.revocation_reason,
    }
    try:
        cert = x509.load_pem_x509_certificates((ca.dir / entry.cert).read_bytes())[0]
    except (OSError, ValueError, IndexError):
        return described
    return {**certificate_json(cert), **described}


def _show(ca: CertificateAuthority, entry: Issued) -> None:
    print(f"issued {entry.kind} certificate {entry.name!r} (serial {entry.serial})")
    print(f"  subject   {entry.subject}")
    if entry.sans:
        print(f"  SANs      {', '.join(entry.sans)}")
    print(f"  valid     {entry.not_before} .. {entry.not_after}")
    print(f"  cert      {ca.dir / entry.cert}   (certificate, then the CA)")
    if entry.key:
        print(f"  key       {ca.dir / entry.key}   (mode 0600)")


def _config_sans(path: Path) -> list[str]:
    """Every host name a gateway configuration advertises."""
    from ..config import ConfigError, load_config

    try:
        config = load_config(path)
    except ConfigError as exc:
        raise CaError(str(exc)) from None
    names: list[str] = []
    for listener in config.listeners:
        names.append(listener.advertised_host)
        if listener.sni is not None:
            first, dot, rest = listener.sni.broker_host.partition(".")
            if "{node_id}" not in first or not dot:
                raise CaError(
                    f"listener {listener.name}: sni.broker_host must carry {{node_id}} in its"
                    " first label to be covered by a wildcard; list the names with --san"
                )
            names.append(f"*.{rest}")
    return names


def cmd_init_ca(args: argparse.Namespace) -> int:
    ca = CertificateAuthority.create(
        args.dir / args.ca,
        parse_subject(args.subject or f"CN={args.ca} CA"),
        days=args.days,
        key_type=args.key_type,
        password=_secret(args.key_password_file),
        crl_days=args.crl_days,
    )
    cert = ca.certificate
    after = {
        **certificate_json(cert),
        "ca_dir": str(ca.dir),
        "key_type": args.key_type,
        "key_encrypted": args.key_password_file is not None,
    }
    _record(args, "cert.ca_create", f"ca:{args.ca}", None, after)
    print(f"created CA {args.ca!r} in {ca.dir}")
    print(f"  subject   {cert.subject.rfc4514_string()}")
    print(f"  valid to  {cert.not_valid_after_utc:%Y-%m-%d}")
    print(f"  ca.pem    {ca.cert_path}   (give to clients / listeners' client_cas)")
    print(f"  ca.key    {ca.key_path}   (mode 0600; keep it offline if you can)")
    print(f"  crl.pem   {ca.crl_path}")
    return 0


def cmd_issue(args: argparse.Namespace) -> int:
    ca = _ca(args)
    san_texts = list(args.san or [])
    if getattr(args, "config", None) is not None:
        san_texts += _config_sans(args.config)
    sans = [parse_san(s) for s in dict.fromkeys(san_texts)]
    csr = _csr(args.csr)
    if args.subject:
        subject = parse_subject(args.subject)
    elif csr is not None:
        # The subject becomes the client's principal (tls.principal rules): the CA's
        # admin says it, never the requester, who could name another tenant's.
        raise CaError(
            f"--csr needs --subject: the certificate's subject is its principal, so it "
            f"is yours to set, not the request's (it asks for {csr.subject.rfc4514_string()!r})"
        )
    else:
        subject = parse_subject(f"CN={args.name}")
    entry = ca.issue(
        args.name,
        args.kind,
        subject,
        sans,
        days=args.days,
        key_type=args.key_type,
        csr=csr,
        also_client=getattr(args, "also_client", False),
        key_password=_secret(args.key_password_file, create=True),
    )
    _record(args, "cert.issue", f"cert:{args.ca}/{entry.name}", None, _described(ca, entry))
    _show(ca, entry)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    ca = CertificateAuthority(args.dir / args.ca)
    password = _secret(args.password_file, create=True)
    assert password is not None
    out = args.out or (ca.dir / "issued" / f"{args.name}.p12")
    ca.export_pkcs12(args.name, out, password, key_password=_secret(args.key_password_file))
    print(f"wrote PKCS#12 keystore {out} (mode 0600; key, certificate and CA)")
    print("  Java/Kafka: ssl.keystore.type=PKCS12, ssl.keystore.location=<that file>,")
    print(f"  ssl.keystore.password and ssl.key.password = the contents of {args.password_file}")
    return 0


def cmd_truststore(args: argparse.Namespace) -> int:
    ca = CertificateAuthority(args.dir / args.ca)
    password = _secret(args.password_file, create=True)
    assert password is not None
    ca.export_truststore(args.out, password)
    print(f"wrote PKCS#12 truststore {args.out} trusting {ca.certificate.subject.rfc4514_string()}")
    print("  Java/Kafka: ssl.truststore.type=PKCS12, ssl.truststore.location=<that file>")
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    ca = _ca(args)
    entry = ca.revoke(args.which, args.reason, crl_days=args.crl_days)
    after = _described(ca, entry)
    before = {**after, "revoked_at": None, "revocation_reason": None}
    _record(args, "cert.revoke", f"cert:{args.ca}/{entry.name}", before, after)
    print(f"revoked {entry.name!r} (serial {entry.serial}, reason {entry.revocation_reason})")
    print(f"  CRL rewritten: {ca.crl_path} — gateways watching it refuse the certificate")
    print("  on the next handshake (or send them SIGHUP)")
    return 0


def cmd_crl(args: argparse.Namespace) -> int:
    ca = _ca(args)
    path = ca.write_crl(args.crl_days)
    crl = x509.load_pem_x509_crl(path.read_bytes())
    after = {
        "crl": str(path),
        "crl_number": ca.index().crl_number,
        "revoked": len(crl),
        "next_update": crl.next_update_utc.isoformat() if crl.next_update_utc else None,
    }
    _record(args, "cert.crl_sign", f"ca:{args.ca}", None, after)
    print(f"re-signed {path}, next update in {args.crl_days} days")
    return 0


def _cas(args: argparse.Namespace) -> list[CertificateAuthority]:
    if args.ca:
        return [CertificateAuthority(args.dir / args.ca)]
    cas = find_cas(args.dir)
    if not cas:
        raise CaError(f"{args.dir}: no CA directories (create one with kgw certs init-ca)")
    return cas


def cmd_list(args: argparse.Namespace) -> int:
    now = utcnow()
    rows = [("CA", "NAME", "KIND", "SERIAL", "ISSUED", "EXPIRES", "DAYS", "STATUS", "SUBJECT")]
    for ca in _cas(args):
        cert = ca.certificate
        days = (cert.not_valid_after_utc - now).days
        rows.append(
            (ca.dir.name, "(ca)", "ca", f"{cert.serial_number:x}"[:16], "-",
             f"{cert.not_valid_after_utc:%Y-%m-%d}", str(days), "valid",
             cert.subject.rfc4514_string())
        )  # fmt: skip
        for e in ca.index().issued:
            days = (e.expires - now).days
            status = "revoked" if e.revoked_at else ("expired" if days < 0 else "valid")
            rows.append(
                (ca.dir.name, e.name, e.kind, e.serial[:16], e.issued_at[:10],
                 e.not_after[:10], str(days), status, e.subject)
            )  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def cmd_expiring(args: argparse.Namespace) -> int:
    within = datetime.timedelta(days=args.within_days)
    crl_within = datetime.timedelta(days=args.crl_within_days)
    found = [item for ca in _cas(args) for item in ca.expiring(within, crl_within)]
    if not found:
        print(
            f"nothing expires within {args.within_days} days "
            f"(CRLs: none due for re-signing within {args.crl_within_days} days)"
        )
        return 0
    now = utcnow()
    for what, when in sorted(found, key=lambda item: item[1]):
        left = (when - now).days
        state = "EXPIRED" if when <= now else f"in {left} days"
        print(f"WARNING: {what} expires {when:%Y-%m-%d %H:%M}Z ({state})", file=sys.stderr)
    return 1


def _audit_config(args: argparse.Namespace) -> Any:
    """The gateway configuration ``server --config`` names (its audit section), if any."""
    path = getattr(args, "config", None)
    if path is None:
        return None
    from ..config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        raise CaError(str(exc)) from None


def _run(func: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        recorder: ChangeRecorder | None = None
        try:
            if hasattr(args, "audit_trail"):  # a command that changes a CA
                recorder = ChangeRecorder.for_command(args, _audit_config(args))
                args.recorder = recorder
            code: int = func(args)
        except (CaError, AuditError) as exc:
            print(f"kgw certs: {exc}", file=sys.stderr)
            code = 2
        return recorder.finish(code) if recorder is not None else code

    return run


def register(commands: Any) -> None:
    certs = commands.add_parser("certs", help="certificate authority: issue, export, revoke, list")
    certs.add_argument("--dir", type=Path, default=Path("certs"), help="CA root (default: certs)")
    sub = certs.add_subparsers(dest="certs_command", required=True)

    def ca_password(p: argparse.ArgumentParser) -> None:
        p.add_argument("--ca-password-file", type=Path, help="file holding the CA key passphrase")

    p = sub.add_parser("init-ca", help="create a CA (one per tenant, one for the gateway)")
    p.add_argument("ca", help="CA directory name, e.g. tenant-acme")
    p.add_argument("--subject", help="RFC 4514 DN (default CN=<ca> CA)")
    p.add_argument("--days", type=int, default=3650)
    p.add_argument("--key-type", choices=("ec", "rsa"), default="ec")
    p.add_argument("--key-password-file", type=Path, help="encrypt ca.key with this passphrase")
    p.add_argument("--crl-days", type=int, default=30, help="validity of each CRL")
    add_audit_args(p, actor=True)
    p.set_defaults(func=_run(cmd_init_ca))

    for kind, days, help_text in (
        ("server", 397, "issue a server certificate (SANs for every advertised host)"),
        ("client", 365, "issue a client certificate for a tenant application"),
    ):
        p = sub.add_parser(kind, help=help_text)
        p.add_argument("ca")
        p.add_argument("name", help="file name under issued/, e.g. payments-app")
        p.add_argument("--subject", help="RFC 4514 DN (default CN=<name>; required with --csr)")
        p.add_argument(
            "--san", action="append", help="DNS:host, IP:addr, URI:uri or EMAIL:addr (repeat)"
        )
        p.add_argument("--days", type=int, default=days)
        p.add_argument("--key-type", choices=("ec", "rsa"), default="ec")
        p.add_argument("--csr", type=Path, help="sign this CSR instead of creating a key")
        p.add_argument(
            "--key-password-file", type=Path, help="encrypt the new key (created if new)"
        )
        ca_password(p)
        if kind == "server":
            p.add_argument(
                "--config", type=Path, help="add every host this gateway config advertises"
            )
            p.add_argument(
                "--also-client", action="store_true", help="also clientAuth (broker keystores)"
            )
        add_audit_args(p, actor=True)
        p.set_defaults(func=_run(cmd_issue), kind=kind)

    p = sub.add_parser("export", help="PKCS#12 keystore (key + certificate + CA) for Java clients")
    p.add_argument("ca")
    p.add_argument("name")
    p.add_argument("--out", type=Path, help="default: <ca>/issued/<name>.p12")
    p.add_argument(
        "--password-file", type=Path, required=True, help="keystore password (created if new)"
    )
    p.add_argument("--key-password-file", type=Path, help="passphrase of the issued key, if any")
    p.set_defaults(func=_run(cmd_export))

    p = sub.add_parser("truststore", help="PKCS#12 truststore with the CA certificate (Java)")
    p.add_argument("ca")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--password-file", type=Path, required=True, help="created if new")
    p.set_defaults(func=_run(cmd_truststore))

    p = sub.add_parser("revoke", help="revoke a certificate and rewrite the CRL")
    p.add_argument("ca")
    p.add_argument("which", help="name or hex serial")
    p.add_argument("--reason", default="unspecified", help="e.g. key_compromise, superseded")
    p.add_argument("--crl-days", type=int, default=30)
    ca_password(p)
    add_audit_args(p, actor=True)
    p.set_defaults(func=_run(cmd_revoke))

    p = sub.add_parser("crl", help="re-sign the CRL (before its next update)")
    p.add_argument("ca")
    p.add_argument("--crl-days", type=int, default=30)
    ca_password(p)
    add_audit_args(p, actor=True)
    p.set_defaults(func=_run(cmd_crl))

    p = sub.add_parser("list", help="what was issued, when it expires, what is revoked")
    p.add_argument("ca", nargs="?")
    p.set_defaults(func=_run(cmd_list))

    p = sub.add_parser("expiring", help="warn about what expires soon (exit 1 if anything)")
    p.add_argument("ca", nargs="?")
    p.add_argument("--within-days", type=int, default=30, help="CA and certificates")
    p.add_argument(
        "--crl-within-days",
        type=int,
        default=7,
        help="CRLs (they live --crl-days, 30 by default: re-sign them weekly)",
    )
    p.set_defaults(func=_run(cmd_expiring))
