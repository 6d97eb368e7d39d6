"""Redis URLs that take their password from a file (``?password_file=``), read when the
configuration is loaded; errors name the file and the key, never the password."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from gateway.config import ConfigError, parse_config
from gateway.redisurl import with_password_file


def secret_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "redis-password"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_the_password_is_read_into_the_url(tmp_path: Path) -> None:
    path = secret_file(tmp_path, "s3cr&t/pw\n", 0o440)
    url = with_password_file(f"redis://kgw-redis:6379/0?password_file={path}&db=1")
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("redis", "kgw-redis:6379", "/0")
    assert parse_qs(parts.query) == {"db": ["1"], "password": ["s3cr&t/pw"]}


def test_redis_py_connects_with_it(tmp_path: Path) -> None:
    from redis.connection import parse_url

    path = secret_file(tmp_path, "pw-1\n")
    for url in (f"redis://h:1/2?password_file={path}", f"unix:///run/r.sock?password_file={path}"):
        assert parse_url(with_password_file(url))["password"] == "pw-1"


def test_a_url_without_one_is_unchanged() -> None:
    url = "rediss://:inline@h:6380/0"
    assert with_password_file(url) == url


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "cannot read"),
        ("others", "accessible by others"),
        ("empty", "is empty"),
        ("both", "not both"),
    ],
)
def test_bad_password_files_are_refused(tmp_path: Path, setup: str, message: str) -> None:
    path = secret_file(
        tmp_path, "" if setup == "empty" else "pw-2", 0o644 if setup == "others" else 0o600
    )
    if setup == "missing":
        path = tmp_path / "nowhere"
    netloc = ":inline@h" if setup == "both" else "h"
    with pytest.raises(ValueError, match=message) as info:
        with_password_file(f"redis://{netloc}:6379/0?password_file={path}")
    assert "pw-2" not in str(info.value)


def test_the_configuration_reads_it_and_names_the_key(tmp_path: Path) -> None:
    path = secret_file(tmp_path, "pw-3")
    base = {
        "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
        "listeners": [
            {
                "name": "l",
                "bootstrap_port": 19092,
                "broker_port_base": 19100,
                "advertised_host": "127.0.0.1",
            }
        ],
    }
    config = parse_config({**base, "quotas": {"redis_url": f"redis://h:1/0?password_file={path}"}})
    assert config.quotas is not None and "password=pw-3" in str(config.quotas.redis_url)
    path.chmod(0o604)
    with pytest.raises(ConfigError) as info:
        parse_config({**base, "quotas": {"redis_url": f"redis://h:1/0?password_file={path}"}})
    assert "quotas.redis_url" in str(info.value) and "accessible by others" in str(info.value)
    assert "pw-3" not in str(info.value)
