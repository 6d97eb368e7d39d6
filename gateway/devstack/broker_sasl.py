"""SASL listeners for the test and dev clusters (``KafkaCluster``): broker properties,
kafka-storage ``--add-scram`` arguments and the probe's login. No I/O.

PLAIN users go in the listener's JAAS line (``user_<name>="<password>"``); SCRAM
users are written into the cluster metadata when the storage is formatted. An
``admin`` user serves inter-broker traffic (SCRAM when enabled, else PLAIN) and
the readiness probe.
"""

from __future__ import annotations

import re

ADMIN = "admin"
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
_SAFE = re.compile(r"^[A-Za-z0-9_.~-]{1,200}$")  # --add-scram and JAAS need no quoting


def check(mechanisms: tuple[str, ...], users: dict[str, str]) -> None:
    unknown = set(mechanisms) - set(MECHANISMS)
    if not mechanisms or unknown:
        raise ValueError(f"sasl_mechanisms must be some of {MECHANISMS}, got {mechanisms}")
    for name, password in users.items():
        if not _SAFE.match(name) or not _SAFE.match(password):
            raise ValueError(f"SASL user {name!r}: name and password must match {_SAFE.pattern}")


def inter_broker_mechanism(mechanisms: tuple[str, ...]) -> str:
    scram = [m for m in mechanisms if m.startswith("SCRAM-")]
    return scram[-1] if scram else mechanisms[0]


def admin_client_config(
    protocol: str, mechanisms: tuple[str, ...], users: dict[str, str]
) -> dict[str, str]:
    """librdkafka settings logging in as ``admin``."""
    return {
        "security.protocol": protocol,
        "sasl.mechanism": inter_broker_mechanism(mechanisms),
        "sasl.username": ADMIN,
        "sasl.password": users[ADMIN],
    }


def broker_properties(
    protocol: str, mechanisms: tuple[str, ...], users: dict[str, str]
) -> dict[str, str]:
    """``server.properties`` entries for a listener named like its protocol."""
    prefix = f"listener.name.{protocol.lower()}"
    admin = users[ADMIN]
    props = {
        "sasl.enabled.mechanisms": ",".join(mechanisms),
        "sasl.mechanism.inter.broker.protocol": inter_broker_mechanism(mechanisms),
    }
    for mechanism in mechanisms:
        if mechanism == "PLAIN":
            known = " ".join(f'user_{name}="{pw}"' for name, pw in users.items())
            jaas = (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{ADMIN}" password="{admin}" {known};'
            )
        else:
            jaas = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{ADMIN}" password="{admin}";'
            )
        props[f"{prefix}.{mechanism.lower()}.sasl.jaas.config"] = jaas
    return props


STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def authorizer_properties(super_users: tuple[str, ...]) -> dict[str, str]:
    """KRaft's own authorizer, deny by default. ``admin`` (inter-broker) and
    ``User:ANONYMOUS`` (the internal, plaintext controller listener, which carries only
    broker-to-controller traffic) are super users, with ``super_users``."""
    for principal in super_users:
        if ";" in principal or ":" not in principal:
            raise ValueError(f"super user {principal!r}: expected Type:name without ';'")
    users = dict.fromkeys([f"User:{ADMIN}", "User:ANONYMOUS", *super_users])
    return {
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": ";".join(users),
        "allow.everyone.if.no.acl.found": "false",
    }


def scram_format_args(mechanisms: tuple[str, ...], users: dict[str, str]) -> list[str]:
    """kafka-storage ``--add-scram`` arguments: every user, every SCRAM mechanism."""
    args = []
    for mechanism in mechanisms:
        if mechanism.startswith("SCRAM-"):
            for name, password in users.items():
                args += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
    return args
