"""Helpers for the authorization tests: a policy directory, rules, and request sentences."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.authz.casbin_model import MODEL_CONF
from gateway.authz.model import AclRule, Operation, ResourceType
from gateway.authz.policyfile import parse_line

CASES = Path(__file__).parent / "cases"
REPO = Path(__file__).parents[3]
_WHEN = re.compile(
    r"^(?P<principal>\S+) from (?P<host>\S+) (?P<op>[A-Z_]+) (?P<rtype>[A-Z_]+) (?P<name>.+)$"
)

Request = tuple[str, str, ResourceType, str, Operation]


def when(sentence: str) -> Request:
    """``User:alice from 10.0.0.1 WRITE TOPIC orders`` as authorize() arguments."""
    match = _WHEN.match(sentence)
    if match is None:
        raise ValueError(f"not a request sentence: {sentence!r}")
    return (
        match["principal"],
        match["host"],
        ResourceType[match["rtype"]],
        match["name"],
        Operation[match["op"]],
    )


def rule(line: str) -> AclRule:
    """A rule from its policy line (``p, User:a, TOPIC, LITERAL, t, READ, *, allow``)."""
    parsed = parse_line(line)
    assert isinstance(parsed, AclRule), line
    return parsed


def write_policy(directory: Path, policy: str, model: str = MODEL_CONF) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model.conf").write_text(model)
    (directory / "policy.csv").write_text(policy)
    return directory


PolicyDir = Callable[..., Path]


@pytest.fixture
def policy_dir(tmp_path: Path) -> PolicyDir:
    """``policy_dir("p, ...")``: a fresh policy directory holding that policy."""
    counter = iter(range(1_000_000))

    def make(policy: str = "", model: str = MODEL_CONF) -> Path:
        return write_policy(tmp_path / f"policies-{next(counter)}", policy, model)

    return make
