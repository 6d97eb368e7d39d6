"""Acceptance (issue 21): the gateway's container image, built here (``make image``),
runs the gateway against the test cluster as its non-root user on a read-only root
filesystem, a real client produces and consumes through it, and its SBOM lists exactly
what is installed in it."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.devstack import image, sbom
from gateway.devstack.gateway_proc import GatewayProcess, dev_config, pick_ports
from gateway.devstack.kafka_cluster import KafkaCluster
from tests.integration.image_run import ImageRoot, build_image, process_ids, snapshot

RECORDS = 200


@pytest.fixture(scope="module")
def gateway_image() -> Iterator[ImageRoot]:
    started = time.monotonic()
    ref = build_image()
    print(f"image {ref} ready in {time.monotonic() - started:.0f}s")
    root = ImageRoot(ref)
    try:
        yield root
    finally:
        root.close()


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as response:
        return int(response.status)


def test_the_gateway_runs_from_the_image_non_root_on_a_read_only_root(
    gateway_image: ImageRoot, kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    config_dir, state = tmp_path / "config", tmp_path / "state"
    config_dir.mkdir()
    state.mkdir()
    state.chmod(0o777)  # the image's user writes its access log here
    bootstrap, base = pick_ports()
    _, metrics_port = pick_ports(span=1)
    config = dev_config(
        kafka_cluster.bootstrap_servers, bootstrap, base,
        metrics={"bind_host": "127.0.0.1", "port": metrics_port},
        accesslog={"path": f"{image.STATE_DIR}/logs/access.log"},
    )  # fmt: skip
    (config_dir / "gateway.yaml").write_text(yaml.safe_dump(config))
    entrypoint = gateway_image.config["Entrypoint"]
    assert entrypoint == [f"{image.VENV}/bin/kgw", "serve", "--config", image.CONFIG]
    assert gateway_image.user == f"{image.UID}:{image.UID}"
    before = snapshot(gateway_image.root)

    # A write to the root filesystem fails: it is mounted read-only (and not the user's).
    probe = gateway_image.run(
        [f"{image.VENV}/bin/python", "-c", "open('/opt/kgw/x', 'w')"]
    )  # fmt: skip
    assert probe.returncode != 0 and "Read-only file system" in probe.stderr, probe.stderr

    log = (tmp_path / "gateway.log").open("wb")
    argv = gateway_image.command(
        entrypoint, volumes={image.STATE_DIR: state}, ro_volumes={"/etc/kgw": config_dir}
    )
    proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    gateway = GatewayProcess(tmp_path, config)  # to wait on the one started from the image
    gateway.proc, gateway.pid = proc, proc.pid
    gateway.log_path = tmp_path / "gateway.log"
    try:
        gateway.wait_ready(len(kafka_cluster.pids), timeout=90)
        uids, gids = process_ids(proc.pid)
        assert set(uids) == {image.UID} and set(gids) == {image.UID}, (uids, gids)
        assert Path(f"/proc/{proc.pid}/root").resolve() == gateway_image.root.resolve()
        health = f"http://127.0.0.1:{metrics_port}"
        assert _get(f"{health}/healthz") == 200
        assert _get(f"{health}/readyz") == 200

        topic = f"image-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
        admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(60)
        producer = Producer({"bootstrap.servers": gateway.bootstrap, "acks": "all"})
        sent = {f"v-{i}".encode() for i in range(RECORDS)}
        for value in sent:
            producer.produce(topic, value=value, key=value[-1:])
        assert producer.flush(60) == 0
        consumer = Consumer({
            "bootstrap.servers": gateway.bootstrap, "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
        })  # fmt: skip
        consumer.subscribe([topic])
        got: set[bytes] = set()
        deadline = time.monotonic() + 90
        try:
            while got != sent and time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is not None and message.error() is None:
                    got.add(message.value())
        finally:
            consumer.close()
        assert got == sent
        brokers = admin.list_topics(timeout=30).brokers  # the gateway's addresses only
        assert brokers and all(b.host == "127.0.0.1" and b.port >= base for b in brokers.values())
        del admin, producer  # their connections end before the gateway stops
    finally:
        code = gateway.stop(timeout=30)
        log.close()
    assert code == 0, gateway.log_tail()
    access_log = state / "logs" / "access.log"
    assert access_log.exists() and access_log.stat().st_size > 0  # written where configured
    assert access_log.stat().st_uid == image.UID
    after = snapshot(gateway_image.root)
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert not changed, sorted(changed)[:20]


def test_the_sbom_lists_what_is_installed_and_no_package_manager_is_left(
    gateway_image: ImageRoot,
) -> None:
    document = json.loads((gateway_image.root / image.SBOM_PATH.lstrip("/")).read_text())
    assert document["spdxVersion"] == "SPDX-2.3"
    inside = gateway_image.run([f"{image.VENV}/bin/python", "-c", sbom.PYTHON_INVENTORY])
    assert inside.returncode == 0, inside.stderr
    installed = {str(name): str(version) for name, version in json.loads(inside.stdout)}
    assert sbom.listed(document, "pypi") == installed
    assert {"kaas-gateway", "uvloop", "gssapi", "kio", "cryptography"} <= installed.keys()
    assert not {"pip", "setuptools", "wheel"} & {n.lower() for n in installed}
    status = (gateway_image.root / "var/lib/dpkg/status").read_text()
    debs = {c.name: c.version for c in sbom.installed_debs(status)}
    assert sbom.listed(document, "deb") == debs
    assert {"libgssapi-krb5-2:amd64", "libkrb5-3:amd64", "python3.11:amd64"} <= debs.keys()
    assert not {"apt", "dpkg", "perl-base", "gcc-12", "binutils"} & {n.split(":")[0] for n in debs}

    # GSSAPI (libkrb5) and uvloop load; no package manager or compiler can run.
    loads = gateway_image.run(
        [f"{image.VENV}/bin/python", "-c", "import gssapi.raw, uvloop, kio; print('ok')"]
    )
    assert loads.stdout.strip() == "ok", loads.stderr
    for tool in ("apt", "apt-get", "dpkg", "pip", "pip3", "gcc", "cc", "c++", "ld", "perl",
                 "make", "useradd"):  # fmt: skip
        for directory in ("usr/bin", "usr/sbin", "usr/local/bin", "opt/kgw/bin"):
            assert not (gateway_image.root / directory / tool).exists(), f"{directory}/{tool}"
    for module in ("pip", "ensurepip"):
        done = gateway_image.run([f"{image.VENV}/bin/python", "-m", module, "--version"])
        assert done.returncode != 0 and "No module named" in done.stderr, (module, done)
