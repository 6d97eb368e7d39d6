"""The connection bundle a new tenant receives: one directory, ready-to-use settings.

``render`` builds every file's text from a ``BundleSpec`` with no I/O; ``write``
puts them in a new directory (0700) with the files that hold a secret at 0600.

| file | for |
| --- | --- |
| ``client.properties`` | Java clients and Kafka's tools (``--command-config``...) |
| ``librdkafka.properties`` | librdkafka-based clients (kcat ``-F``, C/C++, Go, .NET) |
| ``confluent-kafka.json`` | ``confluent_kafka.Producer(json.load(...))`` |
| ``kafka-python.json`` | ``kafka.KafkaProducer(**json.load(...))`` |
| ``bundle.json`` | what the bundle is (no secret): tenant, bootstrap, namespace, key id |
| ``README.md`` | the tenant's instructions |
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

SECRET_FILES = frozenset(
    {"client.properties", "librdkafka.properties", "confluent-kafka.json", "kafka-python.json"}
)
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


@dataclass(frozen=True, slots=True)
class ClientCertificate:
    """An mTLS client certificate, as files inside the bundle directory."""

    keystore: str  # PKCS#12 (Java, librdkafka)
    keystore_password: str
    cert_pem: str  # PEM certificate chain (kafka-python)
    key_pem: str  # PEM private key (kafka-python)


@dataclass(frozen=True, slots=True)
class BundleSpec:
    tenant: str
    plan: str
    prefix: str
    bootstrap: str
    tls: bool
    key_id: str
    secret: str
    server_ca: str | None = None  # PEM file name inside the bundle, if the CA is given
    certificate: ClientCertificate | None = None
    transparent: bool = False  # plain names (gateway/namespaces): examples without the prefix

    @property
    def security_protocol(self) -> str:
        return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"


def _java_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def java_properties(spec: BundleSpec) -> str:
    jaas = (
        f'{PLAIN_MODULE} required username="{_java_quote(spec.key_id)}" '
        f'password="{_java_quote(spec.secret)}";'
    )
    lines = [
        f"# Kafka client settings for tenant {spec.tenant} (Java clients and Kafka's tools)",
        f"bootstrap.servers={spec.bootstrap}",
        f"security.protocol={spec.security_protocol}",
        "sasl.mechanism=PLAIN",
        f"sasl.jaas.config={jaas}",
    ]
    if spec.tls and spec.server_ca:
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={spec.server_ca}"]
    if spec.tls and spec.certificate is not None:
        cert = spec.certificate
        lines += [
            "ssl.keystore.type=PKCS12",
            f"ssl.keystore.location={cert.keystore}",
            f"ssl.keystore.password={cert.keystore_password}",
        ]
    return "\n".join(lines) + "\n"


def librdkafka_config(spec: BundleSpec) -> dict[str, str]:
    conf = {
        "bootstrap.servers": spec.bootstrap,
        "security.protocol": spec.security_protocol,
        "sasl.mechanism": "PLAIN",
        "sasl.username": spec.key_id,
        "sasl.password": spec.secret,
    }
    if spec.tls and spec.server_ca:
        conf["ssl.ca.location"] = spec.server_ca
    if spec.tls and spec.certificate is not None:
        conf["ssl.keystore.location"] = spec.certificate.keystore
        conf["ssl.keystore.password"] = spec.certificate.keystore_password
    return conf


def kafka_python_config(spec: BundleSpec) -> dict[str, str]:
    conf = {
        "bootstrap_servers": spec.bootstrap,
        "security_protocol": spec.security_protocol,
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": spec.key_id,
        "sasl_plain_password": spec.secret,
    }
    if spec.tls and spec.server_ca:
        conf["ssl_cafile"] = spec.server_ca
    if spec.tls and spec.certificate is not None:
        conf["ssl_certfile"] = spec.certificate.cert_pem
        conf["ssl_keyfile"] = spec.certificate.key_pem
    return conf


def _properties(conf: dict[str, str], title: str) -> str:
    return f"# {title}\n" + "".join(f"{key}={value}\n" for key, value in conf.items())


def readme(spec: BundleSpec) -> str:
    p = "" if spec.transparent else spec.prefix  # what the tenant types
    group_note = "" if spec.transparent else f" (starting with `{p}`)"
    tls_note = (
        "The connection is encrypted (TLS)"
        + (f"; the gateway's CA certificate is `{spec.server_ca}`." if spec.server_ca else ".")
        if spec.tls
        else "The connection is SASL over plain TCP (loopback or a private network only)."
    )
    cert_note = (
        f"\nA client certificate for mTLS is in `{spec.certificate.keystore}` (PKCS#12, Java "
        f"and librdkafka) and `{spec.certificate.cert_pem}`/`{spec.certificate.key_pem}` (PEM, "
        "kafka-python).\n"
        if spec.certificate is not None
        else ""
    )
    return f"""# Kafka connection bundle: tenant `{spec.tenant}`

- bootstrap address: `{spec.bootstrap}`
- security: `{spec.security_protocol}`, SASL mechanism `PLAIN`, API key `{spec.key_id}`
- plan: `{spec.plan}`
{_names_note(spec)}

{tls_note}
{cert_note}
The files below hold your API secret: keep them private (they are 0600) and
never commit them. The secret cannot be shown again; ask for a new key if it is lost.

## Java and Kafka's tools

    kafka-topics.sh --bootstrap-server {spec.bootstrap} --command-config client.properties \\
        --create --topic {p}orders --partitions 3 --replication-factor 3
    kafka-console-producer.sh --bootstrap-server {spec.bootstrap} \\
        --producer.config client.properties --topic {p}orders
    kafka-console-consumer.sh --bootstrap-server {spec.bootstrap} \\
        --consumer.config client.properties --topic {p}orders --group {p}cli --from-beginning

## confluent-kafka (Python)

    import json
    from confluent_kafka import Producer
    producer = Producer(json.load(open("confluent-kafka.json")))
    producer.produce("{p}orders", b"hello"); producer.flush()

Consumers add `group.id`{group_note}. `librdkafka.properties` holds the same
settings for every other librdkafka client (`kcat -F librdkafka.properties ...`).

## kafka-python

    import json
    from kafka import KafkaConsumer
    consumer = KafkaConsumer("{p}orders", group_id="{p}app", **json.load(open("kafka-python.json")))
"""


def _names_note(spec: BundleSpec) -> str:
    if spec.transparent:
        return (
            "- your names: plain, as on a cluster of your own (topic `orders`, group\n"
            "  `billing`, transactional id `tx-1`); you see only your own topics, groups and\n"
            "  transactions. Topic creation beyond your plan is refused with POLICY_VIOLATION."
        )
    p = spec.prefix
    return (
        f"- your namespace: topics, consumer groups and transactional ids whose names start\n"
        f"  with `{p}` (for example topic `{p}orders`, group `{p}billing`). Anything else is\n"
        f"  refused (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED); topic creation\n"
        f"  beyond your plan is refused with POLICY_VIOLATION."
    )


def render(spec: BundleSpec) -> dict[str, str]:
    """Every file of the bundle: name → text."""
    rdkafka = librdkafka_config(spec)
    meta = {
        "tenant": spec.tenant,
        "plan": spec.plan,
        "namespace": spec.prefix,
        "names": "transparent" if spec.transparent else "prefixed",
        "bootstrap": spec.bootstrap,
        "security_protocol": spec.security_protocol,
        "sasl_mechanism": "PLAIN",
        "api_key": spec.key_id,
    }
    return {
        "client.properties": java_properties(spec),
        "librdkafka.properties": _properties(rdkafka, f"librdkafka settings for {spec.tenant}"),
        "confluent-kafka.json": json.dumps(rdkafka, indent=2) + "\n",
        "kafka-python.json": json.dumps(kafka_python_config(spec), indent=2) + "\n",
        "bundle.json": json.dumps(meta, indent=2) + "\n",
        "README.md": readme(spec),
    }


def write(directory: Path, files: dict[str, str]) -> list[Path]:
    """Write ``files`` into ``directory`` (created 0700; refused if it holds anything)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    written = []
    for name, text in files.items():
        path = directory / name
        mode = 0o600 if name in SECRET_FILES else 0o644
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        written.append(path)
    return written
