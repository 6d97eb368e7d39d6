"""``upstream.sasl`` in the configuration, and reading its password file."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, parse_config
from gateway.upstream.identity import UpstreamCredentialError, UpstreamIdentity, read_password
from gateway.upstream.settings import UpstreamSaslConfig


def _config(sasl: dict[str, Any]) -> dict[str, Any]:
    return {
        "upstream": {"bootstrap_servers": ["10.0.0.1:9092"], "sasl": sasl},
        "listeners": [{
            "name": "l", "bootstrap_port": 9092, "broker_port_base": 9100,
            "advertised_host": "kafka.example.com",
        }],
    }  # fmt: skip


def test_a_valid_section() -> None:
    config = parse_config(_config({
        "mechanism": "SCRAM-SHA-512", "username": "kgw", "password_file": "/run/secrets/kgw",
    }))  # fmt: skip
    sasl = config.upstream.sasl
    assert sasl is not None and sasl.mechanism == "SCRAM-SHA-512" and sasl.timeout_s == 10.0


@pytest.mark.parametrize(
    ("sasl", "message"),
    [
        (
            {"mechanism": "GSSAPI", "username": "k", "password_file": "/p"},
            "upstream.sasl.mechanism",
        ),
        ({"mechanism": "PLAIN", "username": "", "password_file": "/p"}, "upstream.sasl.username"),
        ({"mechanism": "PLAIN", "username": "a\nb", "password_file": "/p"}, "control characters"),
        ({"mechanism": "PLAIN", "username": "k"}, "upstream.sasl.password_file"),
        (
            {"mechanism": "PLAIN", "username": "k", "password": "hunter2", "password_file": "/p"},
            "inline password is not accepted",
        ),
        ({"mechanism": "PLAIN", "username": "k", "password_file": "/p", "x": 1}, "upstream.sasl.x"),
    ],
)
def test_bad_sections_name_the_key(sasl: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        parse_config(_config(sasl))
    assert "hunter2" not in str(raised.value)


def test_password_file_first_line_only(tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_text("s3cret value\r\nignored\n")
    path.chmod(0o600)
    assert read_password(path) == "s3cret value"


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"", "is empty"), (b"\n", "is empty"), (b"\xff\xfe", "not UTF-8"), (b"a\0b", "NUL")],
)
def test_unusable_password_files(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "pw"
    path.write_bytes(content)
    with pytest.raises(UpstreamCredentialError, match=reason) as raised:
        read_password(path)
    assert "upstream.sasl.password_file" in str(raised.value)


def test_missing_password_file(tmp_path: Path) -> None:
    with pytest.raises(UpstreamCredentialError, match=r"cannot read .*No such file"):
        read_password(tmp_path / "absent")


def test_an_open_password_file_is_used_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "pw"
    path.write_text("topsecret\n")
    path.chmod(0o644)
    config = UpstreamSaslConfig(mechanism="PLAIN", username="kgw", password_file=path)
    with caplog.at_level(logging.WARNING, logger="kgw.upstream"):
        identity = UpstreamIdentity.load(config)
    assert "readable by others" in caplog.text and "topsecret" not in caplog.text
    assert "topsecret" not in repr(identity)
    assert identity.handshake().mechanism == "PLAIN"


def test_the_commented_example_is_valid() -> None:
    """examples/gateway.yaml carries upstream.sasl commented out; uncommented it must load."""
    import yaml

    text = (Path(__file__).parents[3] / "examples" / "gateway.yaml").read_text()
    start = text.index("\n  # sasl:") + 1
    block = text[start:].split("\n\n")[0].splitlines()
    data = yaml.safe_load("\n".join(line[4:] for line in block if line.startswith("  # ")))
    config = parse_config(_config(data["sasl"]))
    assert config.upstream.sasl is not None
    assert config.upstream.sasl.mechanism == "SCRAM-SHA-512"
    assert config.upstream.sasl.password_file == Path("/etc/kgw/upstream-sasl.pass")
