"""The audit trail: appends chain, and verify names each kind of tampering."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.audit import AuditError, AuditTrail, load_key, write_new_key
from gateway.audit.chain import GENESIS, digest, seal

Lines = list[dict[str, Any]]


def _trail(tmp_path: Path, key: bytes | None = None, entries: int = 5) -> AuditTrail:
    clock = iter(float(1_800_000_000 + i) for i in range(1000))
    trail = AuditTrail(tmp_path / "audit.jsonl", key=key, clock=lambda: next(clock))
    for i in range(1, entries + 1):
        trail.append(f"cli:admin{i % 2}", "policy.add", "policy.csv", {"n": i - 1}, {"n": i})
    return trail


def _read(trail: AuditTrail) -> Lines:
    return [json.loads(line) for line in trail.path.read_text().splitlines()]


def _write(trail: AuditTrail, entries: Lines) -> None:
    trail.path.write_text("".join(json.dumps(e) + "\n" for e in entries))


def _kinds(trail: AuditTrail, **kwargs: Any) -> list[tuple[int, int | None, str]]:
    return [(p.line, p.seq, p.kind) for p in trail.verify(**kwargs).problems]


def _rehash(entry: dict[str, Any], key: bytes | None = None) -> None:
    body = {k: v for k, v in entry.items() if k != "hash"}
    entry["hash"] = digest(body, key)


KEY = b"k" * 32


def _forge(seq: int, prev: str) -> dict[str, Any]:
    return seal(
        seq, "2027-01-15T08:00:09.000Z", "cli:mallory", "policy.add", "x", None, {}, prev, None
    )


def test_untouched_trail_verifies(tmp_path: Path) -> None:
    trail = _trail(tmp_path)
    report = trail.verify()
    assert report.ok, report.problems
    assert report.entries == 5 and report.last_seq == 5
    entries = _read(trail)
    assert entries[0]["prev"] == GENESIS
    assert [e["prev"] for e in entries[1:]] == [e["hash"] for e in entries[:-1]]
    assert entries[0]["ts"] == "2027-01-15T08:00:00.000Z"
    assert entries[2]["before"] == {"n": 2} and entries[2]["after"] == {"n": 3}


def test_append_continues_an_existing_file(tmp_path: Path) -> None:
    _trail(tmp_path, entries=3)
    again = AuditTrail(tmp_path / "audit.jsonl")
    assert again.append("cli:x", "quota.set", "tenant-a", None, {"rate": 5})["seq"] == 4
    assert again.verify().ok


@pytest.mark.parametrize("key", [None, KEY], ids=["unkeyed", "keyed"])
def test_edit_is_found(tmp_path: Path, key: bytes | None) -> None:
    trail = _trail(tmp_path, key)
    entries = _read(trail)
    entries[2]["after"] = {"n": 999}
    _write(trail, entries)
    assert _kinds(trail) == [(3, 3, "edited")]


def test_edit_with_a_recomputed_hash_breaks_the_next_link(tmp_path: Path) -> None:
    trail = _trail(tmp_path)
    entries = _read(trail)
    entries[1]["actor"] = "cli:someone-else"
    _rehash(entries[1])
    _write(trail, entries)
    problems = trail.verify().problems
    assert [(p.line, p.seq, p.kind) for p in problems] == [(3, 3, "broken")]
    assert "line 2 (seq 2)" in problems[0].message


def test_keyed_trail_cannot_be_rehashed_without_the_key(tmp_path: Path) -> None:
    trail = _trail(tmp_path, KEY)
    entries = _read(trail)
    entries[1]["actor"] = "cli:mallory"
    _rehash(entries[1], b"m" * 32)  # the wrong key
    _write(trail, entries)
    assert (2, 2, "edited") in _kinds(trail)


def test_keyed_trail_rewritten_unkeyed_is_found(tmp_path: Path) -> None:
    trail = _trail(tmp_path, KEY)
    prev = GENESIS
    forged = []
    for entry in _read(trail):
        entry = seal(
            entry["seq"],
            entry["ts"],
            "cli:mallory",
            entry["action"],
            entry["target"],
            entry["before"],
            entry["after"],
            prev,
            None,
        )
        forged.append(entry)
        prev = entry["hash"]
    _write(trail, forged)
    kinds = _kinds(trail)
    assert {k for _, _, k in kinds} >= {"unkeyed"}
    assert (0, 5, "edited") in kinds  # the head's MAC no longer matches either


def test_keyed_entries_need_the_key(tmp_path: Path) -> None:
    _trail(tmp_path, KEY)
    unkeyed = AuditTrail(tmp_path / "audit.jsonl")
    assert {p.kind for p in unkeyed.verify().problems} == {"unkeyed", "edited"}


@pytest.mark.parametrize("index", [0, 2])
def test_deletion_is_found(tmp_path: Path, index: int) -> None:
    trail = _trail(tmp_path)
    entries = _read(trail)
    del entries[index]
    _write(trail, entries)
    problems = trail.verify().problems
    assert [(p.line, p.seq, p.kind) for p in problems] == [(index + 1, index + 2, "deleted")]
    assert f"entry seq {index + 1} is missing" in problems[0].message


def test_deleting_the_last_entries_is_found_by_the_head(tmp_path: Path) -> None:
    trail = _trail(tmp_path)
    _write(trail, _read(trail)[:3])
    problems = trail.verify().problems
    assert [(p.line, p.seq, p.kind) for p in problems] == [(0, 4, "truncated")]
    assert "entries 4 to 5 were removed" in problems[0].message


def test_truncation_without_the_head_file_is_found_against_a_kept_hash(tmp_path: Path) -> None:
    trail = _trail(tmp_path)
    kept = _read(trail)[-1]["hash"]
    _write(trail, _read(trail)[:4])
    trail.head_path.unlink()
    assert trail.verify(kept, require_head=False).problems[0].kind == "truncated"
    assert _kinds(trail) == [(0, None, "truncated")]  # a missing head file is itself a problem


def test_insertion_in_the_middle_is_found(tmp_path: Path) -> None:
    trail = _trail(tmp_path)
    entries = _read(trail)
    forged = _forge(3, entries[2]["prev"])
    entries.insert(3, forged)
    _write(trail, entries)
    kinds = _kinds(trail)
    assert (4, 3, "inserted") in kinds
    assert (5, 4, "broken") in kinds


def test_insertion_with_renumbering_is_found(tmp_path: Path) -> None:
    trail = _trail(tmp_path)
    entries = _read(trail)
    forged = _forge(3, entries[1]["hash"])
    for entry in entries[2:]:
        entry["seq"] += 1
        _rehash(entry)
    entries.insert(2, forged)
    _write(trail, entries)
    kinds = _kinds(trail)
    assert (4, 4, "broken") in kinds
    assert (0, 6, "inserted") in kinds  # the head recorded 5 entries


def test_appending_behind_the_trails_back_is_found(tmp_path: Path) -> None:
    trail = _trail(tmp_path)
    entries = _read(trail)
    last = entries[-1]
    entries.append(_forge(6, last["hash"]))
    _write(trail, entries)
    assert _kinds(trail) == [(0, 6, "inserted")]


def test_reordering_is_found(tmp_path: Path) -> None:
    trail = _trail(tmp_path)
    entries = _read(trail)
    entries[2], entries[3] = entries[3], entries[2]
    _write(trail, entries)
    problems = trail.verify().problems
    kinds = [(p.line, p.seq, p.kind) for p in problems]
    assert (4, 3, "reordered") in kinds
    assert not [k for k in kinds if k[2] in ("deleted", "inserted")]


def test_damaged_lines_are_named(tmp_path: Path) -> None:
    trail = _trail(tmp_path)
    lines = trail.path.read_text().splitlines()
    lines[1] = lines[1][:40]
    trail.path.write_text("\n".join(lines) + "\n")
    kinds = _kinds(trail)
    assert (2, None, "malformed") in kinds
    assert (3, 3, "deleted") in kinds


def test_edited_head_file_is_found(tmp_path: Path) -> None:
    trail = _trail(tmp_path, KEY)
    head = json.loads(trail.head_path.read_text())
    head["seq"] = 3
    trail.head_path.write_text(json.dumps(head))
    assert _kinds(trail) == [(0, 3, "edited")]


def test_refuses_to_extend_a_damaged_tail(tmp_path: Path) -> None:
    trail = _trail(tmp_path)
    with open(trail.path, "a") as handle:
        handle.write('{"seq": 6, "half')
    with pytest.raises(AuditError, match="incomplete"):
        trail.append("cli:x", "policy.add", "t", None, None)


def test_values_must_be_json(tmp_path: Path) -> None:
    trail = AuditTrail(tmp_path / "audit.jsonl")
    with pytest.raises(ValueError, match="JSON"):
        trail.append("cli:x", "policy.add", "t", None, {"when": object()})


def test_concurrent_appends_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"

    def worker(n: int) -> Callable[[], None]:
        def run() -> None:
            trail = AuditTrail(path, key=KEY)  # one object per thread: the file lock serializes
            for i in range(25):
                trail.append(f"cli:w{n}", "quota.set", f"tenant-{n}", None, {"i": i})

        return run

    threads = [threading.Thread(target=worker(n)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    report = AuditTrail(path, key=KEY).verify()
    assert report.ok, report.problems
    assert report.entries == 100


def test_key_files(tmp_path: Path) -> None:
    key_file = tmp_path / "audit.key"
    write_new_key(key_file)
    assert os.stat(key_file).st_mode & 0o777 == 0o600
    assert len(load_key(key_file)) == 32
    with pytest.raises(AuditError, match="refusing"):
        write_new_key(key_file)
    os.chmod(key_file, 0o644)
    with pytest.raises(AuditError, match="chmod 600"):
        load_key(key_file)
    short = tmp_path / "short.key"
    short.write_text("abcd")
    short.chmod(0o600)
    with pytest.raises(AuditError, match="at least 16 bytes"):
        load_key(short)
    trail = AuditTrail.open(tmp_path / "t.jsonl", None)
    assert not trail.keyed
