"""deploy/: Kubernetes manifests against Kubernetes' own JSON schemas (strict: no unknown
fields), the systemd units with ``systemd-analyze verify`` and the HAProxy config with
``haproxy -c``; and the facts that tie them to the gateway's configuration."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gateway.config import parse_config
from gateway.devstack import image

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S_VERSION = "1.33"


def _documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def _one(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in _documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name)
    return found[0]


@pytest.mark.parametrize("doc", _documents(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_manifest_matches_the_kubernetes_schema(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_schema_check_catches_mistakes() -> None:
    bad = _one("Deployment", "kgw")
    bad = {**bad, "spec": {**bad["spec"], "replicas": "three"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)
    unknown = {**_one("Service", "kgw"), "spek": {}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(unknown, K8S_VERSION, strict=True)


REDIS_PASSWORD_FILE = "/etc/kgw/redis/password"


def _gateway_config(tmp_path: Path) -> Any:
    """The ConfigMap's configuration, its Redis password file a test file."""
    password = tmp_path / "password"
    password.write_text("test-only\n")
    password.chmod(0o440)
    text = _one("ConfigMap", "kgw-config")["data"]["gateway.yaml"]
    assert text.count(f"password_file={REDIS_PASSWORD_FILE}") == 3  # every Redis URL
    return parse_config(yaml.safe_load(text.replace(REDIS_PASSWORD_FILE, str(password))))


def test_redis_takes_a_password_and_only_the_gateways_pods(tmp_path: Path) -> None:
    config = _gateway_config(tmp_path)
    for url in (
        config.sasl.credential_store.redis_url,
        config.quotas.redis_url,
        config.authorization.redis.url,
    ):
        assert "password=test-only" in url
    pod = _one("Deployment", "kgw")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["redis-auth"]["mountPath"] == str(Path(REDIS_PASSWORD_FILE).parent)
    assert volumes["redis-auth"]["secret"]["secretName"] == "kgw-redis-auth"
    assert volumes["redis-auth"]["secret"]["defaultMode"] & 0o007 == 0  # not for others
    redis = _one("StatefulSet", "kgw-redis")["spec"]["template"]["spec"]["containers"][0]
    (env,) = redis["env"]
    assert env["valueFrom"]["secretKeyRef"] == {"name": "kgw-redis-auth", "key": "password"}
    assert '--requirepass "$REDISCLI_AUTH"' in redis["args"][0]
    assert 'test -n "$REDISCLI_AUTH" ||' in redis["args"][0]  # no password: no start
    policy = _one("NetworkPolicy", "kgw-redis")["spec"]
    assert policy["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "kgw-redis"}
    (rule,) = policy["ingress"]
    (source,) = rule["from"]
    gateway_labels = _one("Deployment", "kgw")["spec"]["template"]["metadata"]["labels"]
    assert source["podSelector"]["matchLabels"].items() <= gateway_labels.items()
    assert rule["ports"] == [{"protocol": "TCP", "port": 6379}]
    assert not any(d["kind"] == "Secret" and d["metadata"]["name"] == "kgw-redis-auth"
                   for d in _documents())  # fmt: skip  # never in the repo


def test_fleet_manifests_fit_the_gateway_configuration(tmp_path: Path) -> None:
    config = _gateway_config(tmp_path)
    deployment = _one("Deployment", "kgw")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] >= 3
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    pause = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["terminationGracePeriodSeconds"] > pause + config.shutdown.drain_timeout_s
    assert config.metrics is not None
    # every request is logged, to the cluster: a pod's filesystem is read-only and goes
    assert config.accesslog is not None and config.accesslog.enabled
    assert config.accesslog.topic is not None
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == config.metrics.port
    (listener,) = config.listeners
    assert listener.broker_port_base is not None
    wanted = {listener.bootstrap_port} | {
        listener.broker_port_base + n for n in range(listener.max_node_id + 1)
    }
    service = _one("Service", "kgw")
    assert service["spec"]["type"] == "LoadBalancer"
    published = {p["port"] for p in service["spec"]["ports"]}
    assert published == wanted == set(ports.values()) - {config.metrics.port}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= set(ports)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    pdb = _one("PodDisruptionBudget", "kgw")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] >= 2
    assert {v["name"] for v in pod["volumes"]} >= {"config", "policies", "tls"}
    assert _one("Secret", "kgw-tls")["data"] == {"tls.crt": "", "tls.key": ""}  # no material


def test_the_deployment_runs_the_image_make_image_builds() -> None:
    pod = _one("Deployment", "kgw")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    variant = image.VARIANTS["gateway"]
    name, tag = container["image"].rsplit(":", 1)
    assert (name.rsplit("/", 1)[1], tag) == (variant.name, image.project_version())
    assert image.version_tag(variant) == f"{image.REGISTRY}/{variant.name}:{tag}"
    # the image's entrypoint serves the mounted configuration: no command/args override
    assert "command" not in container and "args" not in container
    assert variant.entrypoint[1:] == ("serve", "--config", image.CONFIG)
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts[image.CONFIG]["readOnly"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsUser"] == pod["securityContext"]["runAsGroup"] == image.UID
    assert "/tmp" in mounts  # the only writable path this configuration needs


def _systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    assert found, "systemd-analyze is not installed (apt-get install systemd)"
    return found


def test_systemd_units_verify(tmp_path: Path) -> None:
    kgw = Path(sys.executable).with_name("kgw")
    assert kgw.exists()
    units = []
    for unit in ("kgw@.service", "kgw-redis.service"):
        text = (DEPLOY / "systemd" / unit).read_text()
        target = tmp_path / unit.replace("@.", "@test.")
        target.write_text(text.replace("/opt/kgw/venv/bin/kgw", str(kgw)))
        units.append(str(target))
    done = subprocess.run(
        [_systemd_analyze(), "verify", *units], capture_output=True, text=True, timeout=60
    )
    problems = [line for line in done.stderr.splitlines() if "kgw" in line]
    assert done.returncode == 0 and not problems, done.stderr
    template = (DEPLOY / "systemd" / "kgw@.service").read_text()
    for option in ("NoNewPrivileges=yes", "ProtectSystem=strict", "CapabilityBoundingSet=",
                   "ExecReload=/bin/kill -HUP $MAINPID", "KillSignal=SIGTERM"):  # fmt: skip
        assert option in template, option


def test_haproxy_config_is_valid() -> None:
    haproxy = shutil.which("haproxy")
    assert haproxy, "haproxy is not installed (apt-get install haproxy)"
    done = subprocess.run(
        [haproxy, "-c", "-f", str(DEPLOY / "haproxy" / "haproxy.cfg")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_policy_configmap_loads_as_the_gateway_reads_it(tmp_path: Path) -> None:
    """Applied as shipped, the pods start: the model is the project's own (the gateway
    refuses any other) and the empty policy denies everything."""
    from gateway.authz.engine import Authorizer
    from gateway.authz.model import Operation, ResourceType
    from gateway.config import AuthorizationConfig

    data = _one("ConfigMap", "kgw-policies")["data"]
    assert data["model.conf"] == (DEPLOY.parent / "policies" / "model.conf").read_text()
    for name, text in data.items():
        (tmp_path / name).write_text(text)
    authorizer = Authorizer.from_config(AuthorizationConfig(policy_dir=tmp_path))
    decision = authorizer.authorize(
        "User:someone", "10.0.0.1", ResourceType.TOPIC, "kgw.access-log", Operation.READ
    )
    assert not decision.allowed
