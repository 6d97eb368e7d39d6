"""The audit trail's entries and their hash chain: encoding, sealing, verifying. No I/O.

Each entry is one JSON object on one line::

    {"seq": 7, "ts": "2026-11-22T14:00:01.123Z", "actor": "cli:alice",
     "action": "policy.add", "target": "policies/policy.csv",
     "before": {...}, "after": {...}, "prev": "<hash of entry 6>",
     "alg": "hmac-sha256", "hash": "<hash of this entry>"}

``hash`` is SHA-256 (``alg: sha256``) or HMAC-SHA-256 under a secret key
(``alg: hmac-sha256``) over the canonical JSON of every other field, ``prev``
included, so each entry pins the whole history before it. The first entry's
``prev`` is ``GENESIS``. ``verify`` names every entry that was edited, deleted,
inserted or moved.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

GENESIS = "0" * 64
ALG_SHA256 = "sha256"
ALG_HMAC = "hmac-sha256"
FIELDS = ("seq", "ts", "actor", "action", "target", "before", "after", "prev", "alg", "hash")
_STRINGS = ("ts", "actor", "action", "target", "prev", "alg", "hash")


def canonical(value: Any) -> bytes:
    """The one byte encoding that is hashed: sorted keys, no spaces, UTF-8."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def digest(body: Mapping[str, Any], key: bytes | None) -> str:
    data = canonical(dict(body))
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def seal(
    seq: int,
    ts: str,
    actor: str,
    action: str,
    target: str,
    before: Any,
    after: Any,
    prev: str,
    key: bytes | None,
) -> dict[str, Any]:
    """A complete entry (``hash`` last); ``ValueError`` if before/after are not JSON values."""
    body: dict[str, Any] = {
        "seq": seq,
        "ts": ts,
        "actor": actor,
        "action": action,
        "target": target,
        "before": before,
        "after": after,
        "prev": prev,
        "alg": ALG_SHA256 if key is None else ALG_HMAC,
    }
    try:
        body["hash"] = digest(body, key)
    except TypeError as exc:
        raise ValueError(f"audit entry values must be JSON values: {exc}") from None
    return body


def head_mac(seq: int, entry_hash: str, key: bytes | None) -> str:
    """What the head file carries to show it was written by someone holding the key."""
    return digest({"head_seq": seq, "head_hash": entry_hash}, key)


@dataclass(frozen=True, slots=True)
class Head:
    """The last entry as recorded when it was appended (kept beside the trail)."""

    seq: int
    hash: str
    mac: str = ""


@dataclass(frozen=True, slots=True)
class Problem:
    line: int  # 1-based line in the file; 0 when the problem is about the file as a whole
    seq: int | None
    kind: str  # malformed | edited | unkeyed | deleted | inserted | reordered | broken | truncated
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "trail"
        if self.seq is not None:
            where += f" (seq {self.seq})"
        return f"{where}: {self.kind}: {self.message}"


@dataclass(slots=True)
class Report:
    entries: int = 0
    last_seq: int = 0
    last_hash: str = GENESIS
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True, slots=True)
class _Row:
    line: int
    entry: dict[str, Any]

    @property
    def seq(self) -> int:
        seq: int = self.entry["seq"]
        return seq


def parse_line(text: str) -> dict[str, Any] | str:
    """The entry on one line, or why it is not one."""
    try:
        entry = json.loads(text)
    except ValueError:
        return "not a JSON object (the line was edited or cut short)"
    if not isinstance(entry, dict):
        return "not a JSON object"
    missing = [name for name in FIELDS if name not in entry]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    extra = sorted(set(entry) - set(FIELDS))
    if extra:
        return f"unexpected field(s) {', '.join(extra)}"
    if not isinstance(entry["seq"], int) or isinstance(entry["seq"], bool) or entry["seq"] < 1:
        return "seq is not a positive integer"
    bad = [name for name in _STRINGS if not isinstance(entry[name], str)]
    if bad:
        return f"field(s) {', '.join(bad)} not strings"
    return entry


def verify(
    lines: Iterable[str],
    key: bytes | None = None,
    head: Head | None = None,
    expect_head: str | None = None,
) -> Report:
    """Check every line, the order and continuity of the chain, and the recorded head.

    With ``key`` every entry must be keyed (an unkeyed entry in a keyed trail is a
    rewrite by someone without the key). ``head`` is what the head file recorded;
    ``expect_head`` is a hash kept elsewhere (a ticket, another system) that the
    last entry must have.
    """
    report = Report()
    rows: list[_Row] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            report.problems.append(Problem(number, None, "malformed", "blank line"))
            continue
        parsed = parse_line(text)
        if isinstance(parsed, str):
            report.problems.append(Problem(number, None, "malformed", parsed))
            continue
        rows.append(_Row(number, parsed))
        report.problems.extend(_content_problems(number, parsed, key))
    report.entries = len(rows)
    flagged: set[int] = set()
    for problem in _sequence_problems(rows):
        report.problems.append(problem)
        flagged.add(problem.line)
    report.problems.extend(_link_problems(rows, flagged))
    if rows:
        report.last_seq, report.last_hash = rows[-1].seq, rows[-1].entry["hash"]
    report.problems.extend(_head_problems(report, rows, key, head, expect_head))
    report.problems.sort(key=lambda p: (p.line, p.kind))
    return report


def _content_problems(line: int, entry: dict[str, Any], key: bytes | None) -> list[Problem]:
    seq = entry["seq"]
    alg = entry["alg"]
    if alg not in (ALG_SHA256, ALG_HMAC):
        return [Problem(line, seq, "malformed", f"unknown hash algorithm {alg!r}")]
    if alg == ALG_HMAC and key is None:
        return [Problem(line, seq, "unkeyed", "the entry is keyed: verify with --key-file")]
    if alg == ALG_SHA256 and key is not None:
        return [
            Problem(
                line,
                seq,
                "unkeyed",
                "an unkeyed entry in a keyed trail (rewritten by someone without the key)",
            )
        ]
    body = {name: value for name, value in entry.items() if name != "hash"}
    try:
        expected = digest(body, key)
    except (TypeError, ValueError):
        return [Problem(line, seq, "malformed", "values cannot be encoded")]
    if not hmac.compare_digest(expected, entry["hash"]):
        return [Problem(line, seq, "edited", "the entry's content does not match its hash")]
    return []


def _sequence_problems(rows: list[_Row]) -> list[Problem]:
    problems: list[Problem] = []
    counts = Counter(row.seq for row in rows)
    seen: set[int] = set()
    for row in rows:
        if counts[row.seq] > 1 and row.seq in seen:
            problems.append(
                Problem(row.line, row.seq, "inserted", f"a second entry numbered {row.seq}")
            )
        seen.add(row.seq)
    highest = 0
    for row in rows:
        if row.seq < highest and counts[row.seq] == 1:
            problems.append(
                Problem(
                    row.line,
                    row.seq,
                    "reordered",
                    f"comes after an entry numbered {highest} (entries were moved)",
                )
            )
        highest = max(highest, row.seq)
    present = set(counts)
    missing = sorted(set(range(1, highest + 1)) - present)
    for run in _runs(missing):
        after = max((r for r in rows if r.seq < run[0]), key=lambda r: r.seq, default=None)
        line = next((r.line for r in rows if r.seq == run[-1] + 1), 0)
        which = f"{run[0]}" if len(run) == 1 else f"{run[0]} to {run[-1]}"
        place = f"after seq {after.seq}" if after else "at the start of the trail"
        problems.append(
            Problem(line, run[-1] + 1, "deleted", f"entry seq {which} is missing ({place})")
        )
    return problems


def _link_problems(rows: list[_Row], flagged: set[int]) -> list[Problem]:
    problems: list[Problem] = []
    previous_hash, previous = GENESIS, None
    for row in rows:
        if row.entry["prev"] != previous_hash and row.line not in flagged:
            if previous is None:
                what = "the first entry does not start the chain (entries before it were removed)"
            else:
                what = (
                    f"records the previous entry's hash as {row.entry['prev'][:12]}…, but line "
                    f"{previous.line} (seq {previous.seq}) hashes to {previous_hash[:12]}…: that "
                    "entry was changed, or entries were inserted or removed between them"
                )
            problems.append(Problem(row.line, row.seq, "broken", what))
        previous_hash, previous = row.entry["hash"], row
    return problems


def _head_problems(
    report: Report,
    rows: list[_Row],
    key: bytes | None,
    head: Head | None,
    expect_head: str | None,
) -> list[Problem]:
    problems: list[Problem] = []
    if expect_head is not None and expect_head not in {r.entry["hash"] for r in rows}:
        problems.append(
            Problem(
                0,
                None,
                "truncated",
                f"no entry has the recorded hash {expect_head[:12]}…: entries were removed "
                "from the end, or the trail was rewritten",
            )
        )
    if head is None:
        return problems
    if not hmac.compare_digest(head.mac, head_mac(head.seq, head.hash, key)):
        problems.append(Problem(0, head.seq, "edited", "the head file does not match its MAC"))
    elif head.seq > report.last_seq:
        problems.append(
            Problem(
                0,
                report.last_seq + 1,
                "truncated",
                f"the trail ends at seq {report.last_seq} but its head records seq {head.seq}: "
                f"entries {report.last_seq + 1} to {head.seq} were removed from the end",
            )
        )
    elif head.seq < report.last_seq:
        problems.append(
            Problem(
                0,
                head.seq + 1,
                "inserted",
                f"entries after seq {head.seq} were appended without going through the trail",
            )
        )
    elif head.hash != report.last_hash:
        problems.append(
            Problem(0, head.seq, "edited", "the last entry differs from the one the head recorded")
        )
    return problems


def _runs(numbers: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for number in numbers:
        if runs and runs[-1][-1] == number - 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return runs
