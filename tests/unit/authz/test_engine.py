"""The authorizer: per-version cache, live reload, and rejection of broken policies."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from pathlib import Path

import pytest

from gateway.authz.casbin_model import MODEL_CONF
from gateway.authz.engine import Authorizer
from gateway.authz.model import AclFilter, Operation, ResourceType
from gateway.authz.store import PolicyError, PolicyStore
from gateway.config import AuthorizationConfig

from .conftest import PolicyDir, rule, when

ALLOW_A = "p, User:a, TOPIC, LITERAL, t, WRITE, *, allow\n"
ALLOW_B = "p, User:b, TOPIC, LITERAL, t, WRITE, *, allow\n"
A_WRITES = when("User:a from 10.0.0.1 WRITE TOPIC t")
B_WRITES = when("User:b from 10.0.0.1 WRITE TOPIC t")


def _edit(directory: Path, text: str, name: str = "policy.csv") -> None:
    """Replace a file the way an editor or a config-management tool would."""
    path = directory / name
    temp = path.with_suffix(".new")
    temp.write_text(text)
    temp.replace(path)


def _rejections(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == "policy_rejected"]


def test_an_edit_takes_effect_on_reload_and_bumps_the_version(policy_dir: PolicyDir) -> None:
    directory = policy_dir(ALLOW_A)
    authorizer = Authorizer(PolicyStore(directory))
    assert authorizer.version == 1
    assert authorizer.authorize(*A_WRITES).allowed
    assert not authorizer.authorize(*B_WRITES).allowed
    assert authorizer.reload_if_changed() is False

    _edit(directory, ALLOW_B)
    assert authorizer.reload_if_changed() is True
    assert authorizer.version == 2
    assert not authorizer.authorize(*A_WRITES).allowed  # the old answer was not reused
    assert authorizer.authorize(*B_WRITES).allowed


def test_comment_only_edits_keep_the_version(policy_dir: PolicyDir) -> None:
    directory = policy_dir(ALLOW_A)
    authorizer = Authorizer(PolicyStore(directory))
    cached = authorizer.authorize(*A_WRITES)
    _edit(directory, "# reviewed by security\n" + ALLOW_A + "\n")
    assert authorizer.reload_if_changed() is False
    assert authorizer.version == 1
    assert authorizer.authorize(*A_WRITES) is cached


def test_a_broken_policy_is_rejected_once_and_the_last_good_one_stays(
    policy_dir: PolicyDir, caplog: pytest.LogCaptureFixture
) -> None:
    directory = policy_dir(ALLOW_A)
    authorizer = Authorizer(PolicyStore(directory))
    caplog.set_level(logging.INFO, logger="kgw.authz")

    _edit(directory, ALLOW_B + "p, User:c, TOPIC, LITERAL, t, WRITE, 10.0.0.1/8, allow\n")
    assert authorizer.reload_if_changed() is False
    assert authorizer.reload_if_changed(fresh=True) is False
    (record,) = _rejections(caplog)
    assert record.levelno == logging.ERROR
    assert "policy.csv:2: error: CIDR '10.0.0.1/8' has host bits set" in record.reason  # type: ignore[attr-defined]
    assert record.path == str(directory / "policy.csv")  # type: ignore[attr-defined]
    assert authorizer.version == 1
    assert authorizer.authorize(*A_WRITES).allowed and not authorizer.authorize(*B_WRITES).allowed
    assert authorizer.last_rejection is not None

    _edit(directory, ALLOW_B)  # fixed
    assert authorizer.reload_if_changed() is True
    assert authorizer.authorize(*B_WRITES).allowed
    assert authorizer.last_rejection is None


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("[request_definition]\nr = sub, obj, act\n", "policy_definition"),
        (MODEL_CONF.replace("!some(where (p.eft == deny))", "true"), "policy_effect"),
        (MODEL_CONF.replace("hostMatch(r.host", "hostMatches(r.host"), "does not evaluate"),
        (MODEL_CONF.replace("[matchers]", "[nonsense"), "model.conf"),
    ],
)
def test_a_broken_model_is_rejected(
    policy_dir: PolicyDir, caplog: pytest.LogCaptureFixture, model: str, message: str
) -> None:
    directory = policy_dir(ALLOW_A)
    authorizer = Authorizer(PolicyStore(directory))
    _edit(directory, model, "model.conf")
    assert authorizer.reload_if_changed() is False
    (record,) = _rejections(caplog)
    assert message in record.reason  # type: ignore[attr-defined]
    assert authorizer.authorize(*A_WRITES).allowed


def test_a_vanished_file_is_rejected_too(
    policy_dir: PolicyDir, caplog: pytest.LogCaptureFixture
) -> None:
    directory = policy_dir(ALLOW_A)
    authorizer = Authorizer(PolicyStore(directory))
    (directory / "policy.csv").unlink()
    assert authorizer.reload_if_changed() is False
    assert authorizer.reload_if_changed() is False
    assert len(_rejections(caplog)) == 1
    assert authorizer.authorize(*A_WRITES).allowed


def test_start_up_fails_on_a_broken_policy(policy_dir: PolicyDir, tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"policy\.csv:1: error"):
        Authorizer(PolicyStore(policy_dir("p, User:a\n")))
    with pytest.raises(PolicyError, match="cannot read"):
        Authorizer(PolicyStore(tmp_path / "nowhere"))
    with pytest.raises(PolicyError, match=r"model\.conf"):
        Authorizer(PolicyStore(policy_dir(ALLOW_A, model="[matchers]\nm = 1\n")))


def test_a_change_through_the_store_applies_at_once(policy_dir: PolicyDir) -> None:
    authorizer = Authorizer(PolicyStore(policy_dir(ALLOW_A)))
    authorizer.store.add([rule(ALLOW_B.strip())], actor="User:admin")
    assert authorizer.version == 2
    assert authorizer.authorize(*B_WRITES).allowed
    authorizer.store.remove(AclFilter(principal="User:a"), actor="User:admin")
    assert authorizer.version == 3
    assert not authorizer.authorize(*A_WRITES).allowed


def test_role_membership_changes_apply(policy_dir: PolicyDir) -> None:
    authorizer = Authorizer(
        PolicyStore(policy_dir("p, Role:w, TOPIC, LITERAL, t, WRITE, *, allow\n"))
    )
    assert not authorizer.authorize(*A_WRITES).allowed
    authorizer.store.add_role_member("User:a", "Role:w", actor="x")
    assert authorizer.authorize(*A_WRITES).allowed


def test_nine_nested_roles_are_followed(policy_dir: PolicyDir) -> None:
    chain = ["User:a", *(f"Role:r{i}" for i in range(1, 10))]
    text = "".join(f"g, {m}, {r}\n" for m, r in itertools.pairwise(chain))
    text += "p, Role:r9, TOPIC, LITERAL, t, WRITE, *, allow\n"
    assert Authorizer(PolicyStore(policy_dir(text))).authorize(*A_WRITES).allowed


def test_the_cache_is_bounded(policy_dir: PolicyDir) -> None:
    authorizer = Authorizer(PolicyStore(policy_dir(ALLOW_A)), cache_size=10)
    for i in range(50):
        authorizer.authorize("User:a", f"10.0.0.{i}", ResourceType.TOPIC, "t", Operation.WRITE)
    info = authorizer._state.decide.cache_info()  # type: ignore[attr-defined]
    assert info.currsize == 10


def test_from_config(policy_dir: PolicyDir) -> None:
    directory = policy_dir(ALLOW_A)
    config = AuthorizationConfig(policy_dir=directory, super_users=["User:root"], cache_size=5)
    authorizer = Authorizer.from_config(config)
    assert authorizer.authorize(
        "User:root", "::1", ResourceType.CLUSTER, "kafka-cluster", Operation.ALTER
    ).allowed
    assert authorizer.store.policy_path == directory / "policy.csv"
    assert authorizer.notifier is None


async def test_watch_applies_an_edit_within_a_second(policy_dir: PolicyDir) -> None:
    directory = policy_dir(ALLOW_A)
    authorizer = Authorizer(PolicyStore(directory), reload_interval_s=0.25)
    stop = asyncio.Event()
    watcher = asyncio.create_task(authorizer.watch(stop))
    try:
        await asyncio.sleep(0.1)
        _edit(directory, ALLOW_B)
        edited = time.monotonic()
        while not authorizer.authorize(*B_WRITES).allowed:
            assert time.monotonic() - edited < 1.0, "the edit did not take effect within 1 s"
            await asyncio.sleep(0.01)
        assert not authorizer.authorize(*A_WRITES).allowed
    finally:
        stop.set()
        await asyncio.wait_for(watcher, 2)


async def test_watch_stops_promptly_even_with_a_long_interval(policy_dir: PolicyDir) -> None:
    authorizer = Authorizer(PolicyStore(policy_dir(ALLOW_A)), reload_interval_s=60)
    stop = asyncio.Event()
    watcher = asyncio.create_task(authorizer.watch(stop))
    await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(watcher, 1)
