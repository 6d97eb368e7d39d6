"""Kafka-style principal mapping rules (``ssl.principal.mapping.rules``)."""

from __future__ import annotations

import pytest
from cryptography import x509

from gateway.tls.principal import (
    NoPrincipal,
    RuleError,
    apply_rules,
    certificate_name,
    parse_rules,
    principal_of,
)

from .conftest import Pki

DN = "CN=App1,OU=Payments,O=Acme,C=US"


@pytest.mark.parametrize(
    ("rules", "name", "expected"),
    [
        (["DEFAULT"], DN, DN),
        # Kafka's documented examples
        (["RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "DEFAULT"], "CN=svc,OU=ServiceUsers,O=x", "svc"),
        (
            ["RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L", "DEFAULT"],
            "CN=Duke,OU=JavaSoft,O=Sun,L=Cupertino,ST=CA,C=US",
            "duke@javasoft",
        ),
        (
            ["RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L", "DEFAULT"],
            "CN=Kafka.Server,O=x",
            "kafka.server",
        ),
        (["RULE:^CN=([^,]+),OU=([^,]+).*$/$2.$1/U"], DN, "PAYMENTS.APP1"),
        # first rule that applies wins; a rule must match the whole name
        (["RULE:CN=App1/nope/", "RULE:^CN=([^,]+).*$/$1/", "DEFAULT"], DN, "App1"),
        (["RULE:^O=(.*)$/$1/", "DEFAULT"], DN, DN),
        # named groups, escaped slash in pattern and replacement, escaped dollar
        (["RULE:^CN=(?P<cn>[^,]+).*$/app-${cn}/L"], DN, "app-app1"),
        (
            ["RULE:^spiffe:\\/\\/([^\\/]+)\\/(.*)$/$1\\/$2/"],
            "spiffe://acme/pay/app",
            "acme/pay/app",
        ),
        (["RULE:^CN=([^,]+).*$/\\$$1/"], DN, "$App1"),
        ([" RULE:^CN=([^,]+).*$/$1/ "], DN, "App1"),
    ],
)
def test_rules_map_names(rules: list[str], name: str, expected: str) -> None:
    assert apply_rules(parse_rules(rules), name) == expected


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([], "at least one rule"),
        (["NONSENSE"], "expected DEFAULT or RULE"),
        (["RULE:(unclosed/x/"], "bad regular expression"),
        (["RULE:^(a)$/$2/"], "has 1 groups"),
        (["RULE:^(a)$/${nope}/"], "no group named"),
        (["RULE:^(a)$/$/"], "must name a group"),
        (["RULE:^(a)$/x/Q"], "expected DEFAULT or RULE"),
    ],
)
def test_bad_rules_are_refused_at_parse_time(rules: list[str], message: str) -> None:
    with pytest.raises(RuleError, match=message):
        parse_rules(rules)


def test_no_applicable_rule_means_no_principal() -> None:
    with pytest.raises(NoPrincipal, match="no principal mapping rule applies"):
        apply_rules(parse_rules(["RULE:^CN=x$/x/"]), DN)
    with pytest.raises(NoPrincipal, match="empty"):
        apply_rules(parse_rules(["RULE:^CN=x$//"]), "CN=x")


def _cert(pki: Pki, name: str) -> x509.Certificate:
    path, _ = pki.pair(pki.tenant, name)
    return x509.load_pem_x509_certificates(path.read_bytes())[0]


def test_certificate_names_from_subject_and_sans(pki: Pki) -> None:
    cert = _cert(pki, "app")
    assert certificate_name(cert, "subject") == "CN=app1,OU=Payments,O=Acme"
    assert certificate_name(cert, "san_uri") == "spiffe://acme/payments/app1"
    assert certificate_name(cert, "san_email") == "app1@acme.test"
    with pytest.raises(NoPrincipal, match="no dns SAN"):
        certificate_name(cert, "san_dns")
    with pytest.raises(NoPrincipal, match="no uri SAN"):
        certificate_name(_cert(pki, "expired"), "san_uri")


def test_principal_is_user_of_mapped_name(pki: Pki) -> None:
    cert = _cert(pki, "app")
    rules = parse_rules(["RULE:^CN=([^,]+),OU=([^,]+).*$/$2.$1/L", "DEFAULT"])
    assert principal_of(cert, "subject", rules) == "User:payments.app1"
    spiffe = parse_rules([r"RULE:^spiffe:\/\/([^\/]+)\/(.*)$/$1:$2/"])
    assert principal_of(cert, "san_uri", spiffe) == "User:acme:payments/app1"
