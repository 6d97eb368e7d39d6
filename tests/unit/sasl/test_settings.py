"""The ``sasl`` configuration section, through the gateway's config loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config import ConfigError, parse_config

BASE: dict[str, Any] = {
    "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
    "listeners": [
        {"name": "p", "bootstrap_port": 19092, "broker_port_base": 19100, "advertised_host": "h"}
    ],
}


def with_sasl(sasl: dict[str, Any]) -> dict[str, Any]:
    return {**BASE, "sasl": sasl}


def test_absent_section_means_no_sasl() -> None:
    assert parse_config(BASE).sasl is None


def test_full_section() -> None:
    config = parse_config(
        with_sasl(
            {
                "mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI"],
                "credential_store": {"redis_url": "redis://127.0.0.1:6379/0", "cache_ttl_s": 0.5},
                "scram_iterations": 16384,
                "kerberos": {
                    "keytab": "/etc/kgw/kafka.keytab",
                    "service_principal": "kafka/gw.example.com@EXAMPLE.COM",
                    "principal_to_local_rules": [
                        r"RULE:[1:$1@$0](.*@EXAMPLE\.COM)s/@.*//",
                        "DEFAULT",
                    ],
                },
                "session_lifetime_s": 600,
                "auth_timeout_s": 5,
                "failure_limiter": {"max_failures": 3, "window_s": 30, "max_delay_s": 10},
            }
        )
    )
    sasl = config.sasl
    assert sasl is not None and sasl.kerberos is not None
    assert sasl.kerberos.realm == "EXAMPLE.COM"
    assert sasl.failure_limiter.max_failures == 3


@pytest.mark.parametrize(
    ("sasl", "message"),
    [
        ({"mechanisms": []}, "sasl.mechanisms"),
        ({"mechanisms": ["OAUTHBEARER"]}, "sasl.mechanisms.0"),
        ({"mechanisms": ["PLAIN"]}, "credential_store is required"),
        ({"mechanisms": ["PLAIN", "PLAIN"], "credential_store": {"file": "c"}}, "repeat"),
        ({"mechanisms": ["GSSAPI"]}, "kerberos is required"),
        (
            {"mechanisms": ["PLAIN"], "credential_store": {"file": "c", "redis_url": "redis://x"}},
            "exactly one",
        ),
        ({"mechanisms": ["PLAIN"], "credential_store": {}}, "exactly one"),
        (
            {"mechanisms": ["PLAIN"], "credential_store": {"file": "c", "cache_ttl_s": 5}},
            "cache_ttl_s",
        ),
        (
            {
                "mechanisms": ["SCRAM-SHA-256"],
                "credential_store": {"file": "c"},
                "scram_iterations": 1000,
            },
            "scram_iterations",
        ),
        (
            {"mechanisms": ["GSSAPI"], "kerberos": {"keytab": "k", "service_principal": "kafka"}},
            "service/host@REALM",
        ),
        ({"mechanisms": ["GSSAPI"], "kerberos": {"keytab": "k"}}, "default_realm is required"),
        (
            {
                "mechanisms": ["GSSAPI"],
                "kerberos": {
                    "keytab": "k",
                    "default_realm": "R",
                    "principal_to_local_rules": ["RULE:x"],
                },
            },
            "principal_to_local_rules",
        ),
        (
            {
                "mechanisms": ["GSSAPI"],
                "kerberos": {"keytab": "k", "default_realm": "R"},
                "typo": 1,
            },
            "sasl.typo",
        ),
    ],
)
def test_bad_sections_name_the_key(sasl: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("@", "@")):
        parse_config(with_sasl(sasl))


def test_the_commented_example_is_valid() -> None:
    """examples/gateway.yaml carries the section commented out; uncommented it must load."""
    text = (Path(__file__).parents[3] / "examples" / "gateway.yaml").read_text()
    start = text.index("\n# sasl:") + 1  # the top-level section, not upstream.sasl
    block = text[start:].split("\n\n")[0].splitlines()  # up to a blank line
    data = yaml.safe_load("\n".join(line[2:] if line.startswith("# ") else "" for line in block))
    config = parse_config(with_sasl(data["sasl"]))
    assert config.sasl is not None and config.sasl.mechanisms[-1] == "GSSAPI"
