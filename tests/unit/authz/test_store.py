"""The policy store: attributable changes to the files, refused when they would break them."""

from __future__ import annotations

import itertools
import multiprocessing
import os
from pathlib import Path

import pytest

from gateway.authz.model import (
    AclFilter,
    InvalidRuleError,
    Operation,
    PatternFilter,
    Permission,
    ResourceType,
)
from gateway.authz.policyfile import Membership
from gateway.authz.store import PolicyChange, PolicyError, PolicyStore

from .conftest import PolicyDir, rule

HEADER = "# tenant policies\n\n"
R1 = "p, User:a, TOPIC, LITERAL, orders, WRITE, *, allow"
R2 = "p, User:b, TOPIC, PREFIXED, orders., READ, 10.0.0.0/8, allow"
R3 = "p, User:a, GROUP, LITERAL, g, READ, *, deny"


def test_list_in_file_order_and_with_a_filter(policy_dir: PolicyDir) -> None:
    store = PolicyStore(policy_dir(HEADER + "\n".join([R1, R2, R3, R1]) + "\n"))
    assert store.list() == [rule(R1), rule(R2), rule(R3)]
    assert store.list(AclFilter(principal="User:a")) == [rule(R1), rule(R3)]
    match = AclFilter(
        resource_type=ResourceType.TOPIC, name="orders.eu", pattern_type=PatternFilter.MATCH
    )
    assert store.list(match) == [rule(R2)]
    assert [line for line, _ in store.located(AclFilter(principal="User:a"))] == [3, 5, 6]


def test_add_appends_keeps_comments_and_reports_only_new_rules(policy_dir: PolicyDir) -> None:
    directory = policy_dir(HEADER + R1)  # no final newline
    store = PolicyStore(directory)
    added = store.add([rule(R1), rule(R2), rule(R2)], actor="User:admin")
    assert added == [rule(R2)]
    text = (directory / "policy.csv").read_text()
    assert text == HEADER + R1 + "\n" + R2 + "\n"
    assert store.add([rule(R2)], actor="User:admin") == []


def test_remove_drops_only_the_selected_lines(policy_dir: PolicyDir) -> None:
    directory = policy_dir(HEADER + f"{R1}\n# keep me\n{R2}\n{R3}\n{R1}\n")
    store = PolicyStore(directory)
    removed = store.remove(AclFilter(principal="User:a", resource_type=ResourceType.TOPIC), "x")
    assert removed == [rule(R1)]
    assert (directory / "policy.csv").read_text() == HEADER + f"# keep me\n{R2}\n{R3}\n"
    assert store.remove(AclFilter(principal="User:nobody"), "x") == []


def test_role_memberships(policy_dir: PolicyDir) -> None:
    store = PolicyStore(policy_dir("p, Role:x, TOPIC, LITERAL, t, READ, *, allow\n"))
    assert store.add_role_member("User:a", "Role:x", "admin") is True
    assert store.add_role_member("User:a", "Role:x", "admin") is False
    assert store.add_role_member("Role:y", "Role:x", "admin") is True
    assert store.roles() == {"Role:x": ["User:a", "Role:y"]}
    assert store.memberships() == [Membership("User:a", "Role:x"), Membership("Role:y", "Role:x")]
    assert store.remove_role_member("User:a", "Role:x", "admin") is True
    assert store.remove_role_member("User:a", "Role:x", "admin") is False
    assert store.roles() == {"Role:x": ["Role:y"]}


def test_every_change_reaches_the_hooks_with_actor_and_digests(policy_dir: PolicyDir) -> None:
    store = PolicyStore(policy_dir(R1 + "\n"))
    seen: list[PolicyChange] = []
    store.add_hook(seen.append)
    store.add([rule(R2)], actor="User:alice")
    store.remove(AclFilter(principal="User:a"), actor="User:bob")
    store.add_role_member("User:c", "Role:x", actor="cli:root")
    store.remove_role_member("User:c", "Role:x", actor="cli:root")
    assert [(c.actor, c.action) for c in seen] == [
        ("User:alice", "add"),
        ("User:bob", "remove"),
        ("cli:root", "add_role_member"),
        ("cli:root", "remove_role_member"),
    ]
    assert seen[0].added == (rule(R2),) and seen[1].removed == (rule(R1),)
    assert seen[2].members_added == (Membership("User:c", "Role:x"),)
    for before, after in itertools.pairwise(seen):
        assert before.after_sha256 == after.before_sha256
    assert all(c.before_sha256 != c.after_sha256 for c in seen)


def test_a_failing_hook_does_not_undo_the_change(policy_dir: PolicyDir) -> None:
    store = PolicyStore(policy_dir())

    def broken(change: PolicyChange) -> None:
        raise RuntimeError("audit sink down")

    store.add_hook(broken)
    assert store.add([rule(R1)], actor="a") == [rule(R1)]
    assert store.list() == [rule(R1)]


def test_invalid_rules_are_refused_before_anything_is_written(policy_dir: PolicyDir) -> None:
    directory = policy_dir(R1 + "\n")
    store = PolicyStore(directory)
    bad = rule(R1).__class__(
        "User:a",
        ResourceType.CLUSTER,
        rule(R1).pattern_type,
        "other",
        Operation.ALTER,
        "*",
        Permission.ALLOW,
    )
    with pytest.raises(InvalidRuleError, match="kafka-cluster"):
        store.add([rule(R2), bad], actor="a")
    with pytest.raises(InvalidRuleError, match="Type:name"):
        store.add_role_member("alice", "Role:x", actor="a")
    assert (directory / "policy.csv").read_text() == R1 + "\n"


def test_changes_to_a_broken_file_are_refused(policy_dir: PolicyDir) -> None:
    directory = policy_dir(R1 + "\np, garbage\n")
    store = PolicyStore(directory)
    with pytest.raises(PolicyError, match=r"policy\.csv:2: error"):
        store.add([rule(R2)], actor="a")
    with pytest.raises(PolicyError):
        store.add_role_member("User:a", "Role:x", actor="a")
    assert (directory / "policy.csv").read_text() == R1 + "\np, garbage\n"


def test_a_membership_that_would_close_a_cycle_is_refused(policy_dir: PolicyDir) -> None:
    store = PolicyStore(policy_dir("g, Role:a, Role:b\n"))
    with pytest.raises(PolicyError, match="cycle"):
        store.add_role_member("Role:b", "Role:a", actor="a")


def test_writes_are_atomic_and_keep_the_file_mode(policy_dir: PolicyDir) -> None:
    directory = policy_dir(R1 + "\n")
    path = directory / "policy.csv"
    path.chmod(0o640)
    inode = path.stat().st_ino
    PolicyStore(directory).add([rule(R2)], actor="a")
    assert path.stat().st_ino != inode  # replaced by rename, never rewritten in place
    assert path.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp")) == []


def test_an_unreadable_file_is_a_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read the policy"):
        PolicyStore(tmp_path).read()


def test_reads_are_cached_until_the_file_changes(policy_dir: PolicyDir) -> None:
    directory = policy_dir(R1 + "\n")
    store = PolicyStore(directory)
    first = store.read()
    assert store.read() is first
    (directory / "policy.csv").write_text(R1 + "\n" + R2 + "\n")
    assert store.read() is not first
    assert store.list() == [rule(R1), rule(R2)]


def test_a_same_size_edit_within_the_same_tick_is_still_seen(policy_dir: PolicyDir) -> None:
    directory = policy_dir(R1 + "\n")
    path = directory / "policy.csv"
    store = PolicyStore(directory)
    store.read()
    stat = path.stat()
    path.write_text(R1.replace("WRITE", "ALTER") + "\n")  # same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same mtime
    assert store.list() == [rule(R1.replace("WRITE", "ALTER"))]


def _add_many(directory: str, worker: int) -> None:
    store = PolicyStore(directory)
    for i in range(15):
        line = f"p, User:w{worker}, TOPIC, LITERAL, t{i}, READ, *, allow"
        store.add([rule(line)], actor=f"worker-{worker}")


def test_concurrent_writers_lose_nothing(policy_dir: PolicyDir) -> None:
    directory = policy_dir()
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_add_many, args=(str(directory), w)) for w in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(30)
        assert process.exitcode == 0
    assert len(PolicyStore(directory).list()) == 60
