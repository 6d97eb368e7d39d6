"""principal_to_local_rules with Kafka's semantics (KerberosShortNamer / KerberosRule)."""

from __future__ import annotations

import pytest

from gateway.sasl.kerberos_rules import (
    KerberosName,
    NoMatchingRule,
    PrincipalMapper,
    RuleError,
    parse_rule,
)

REALM = "EXAMPLE.COM"


def short(rules: list[str], name: str) -> str:
    return PrincipalMapper(rules, REALM).short_name(name)


@pytest.mark.parametrize(
    ("rules", "name", "expected"),
    [
        (["DEFAULT"], "alice@EXAMPLE.COM", "alice"),
        (["DEFAULT"], "kafka/host.example.com@EXAMPLE.COM", "kafka"),
        ([], "alice@EXAMPLE.COM", "alice"),  # no rules: DEFAULT
        ([r"RULE:[1:$1@$0](.*@OTHER\.ORG)s/@.*//", "DEFAULT"], "bob@OTHER.ORG", "bob"),
        ([r"RULE:[1:$1@$0](.*@OTHER\.ORG)s/@.*//", "DEFAULT"], "bob@EXAMPLE.COM", "bob"),
        (
            [r"RULE:[2:$1@$0](kafka@EXAMPLE\.COM)s/.*/kafka-svc/"],
            "kafka/h1@EXAMPLE.COM",
            "kafka-svc",
        ),
        ([r"RULE:[2:$1%$2@$0](.*)s/%.*//"], "svc/h1@EXAMPLE.COM", "svc"),
        ([r"RULE:[1:$1]"], "Alice@ANY.REALM", "Alice"),
        ([r"RULE:[1:$1]/L"], "Alice@ANY.REALM", "alice"),
        ([r"RULE:[1:$1]/U"], "Alice@ANY.REALM", "ALICE"),
        ([r"RULE:[1:$1@$0](.*)s/(.*)@(.*)/$2.$1/L"], "Bob@ACME.IO", "acme.io.bob"),
        ([r"RULE:[1:$1](a.*)s/a/x/g"], "abracadabra@R", "xbrxcxdxbrx"),
        ([r"RULE:[1:$1](a.*)s/a/x/"], "abracadabra@R", "xbracadabra"),
        ([r"RULE:[1:$1]s/\./_/g"], "first.last@R", "first_last"),
    ],
)
def test_mapping(rules: list[str], name: str, expected: str) -> None:
    assert short(rules, name) == expected


def test_first_applicable_rule_wins_and_principal_has_user_prefix() -> None:
    mapper = PrincipalMapper([r"RULE:[1:$1@$0](.*@EXAMPLE\.COM)s/@.*/-emp/", "DEFAULT"], REALM)
    assert mapper.principal("carol@EXAMPLE.COM") == "User:carol-emp"


@pytest.mark.parametrize(
    ("rules", "name"),
    [
        (["DEFAULT"], "alice@OTHER.ORG"),  # DEFAULT only for the default realm
        ([r"RULE:[2:$1](.*)"], "alice@EXAMPLE.COM"),  # component count differs
        ([r"RULE:[1:$1@$0]"], "alice@EXAMPLE.COM"),  # result not simple (@)
        ([r"RULE:[1:$1](x.*)"], "alice@EXAMPLE.COM"),  # regex must match the whole string
        ([r"RULE:[1:$1]s/.*//"], "alice@EXAMPLE.COM"),  # empty result
        (["DEFAULT"], "a/b/c@EXAMPLE.COM"),  # three components: malformed
        (["DEFAULT"], "alice"),  # no realm
    ],
)
def test_no_mapping(rules: list[str], name: str) -> None:
    with pytest.raises(NoMatchingRule):
        short(rules, name)


@pytest.mark.parametrize(
    "rule",
    [
        "RULE:[1:$1",
        "RULE:[3:$1]",
        "RULE:[1:$2]",
        "RULE:[1:$]",
        "RULE:[1:$1](unclosed[)",
        "RULE:[1:$1]s/(a)/$2/",
        "RULE:[1:$1]/X",
        "DEFAULTS",
        "",
    ],
)
def test_bad_rules_are_configuration_errors(rule: str) -> None:
    with pytest.raises(RuleError):
        parse_rule(rule, REALM)


def test_kerberos_name_parsing() -> None:
    assert KerberosName.parse("a/b@R") == KerberosName("a", "b", "R")
    assert str(KerberosName.parse("a@R")) == "a@R"
    assert KerberosName.parse("simple") == KerberosName("simple", None, None)
