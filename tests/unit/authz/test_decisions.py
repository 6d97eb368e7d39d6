"""Decision tables (cases/decisions/*.yaml): given a policy, when a request, then allow or
deny, by which rule.

Each case is also put to plain casbin (``reference_enforcer``: the same model
file, every rule, casbin's own deny-override effector, no candidate filter), which
must agree: the engine's filtering and ordering change speed, never answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.authz.casbin_model import MODEL_CONF, reference_enforcer
from gateway.authz.engine import Authorizer
from gateway.authz.model import DEFAULT_DENY, SUPER_USER
from gateway.authz.policyfile import parse_policy
from gateway.authz.store import PolicyStore

from .conftest import CASES, REPO, PolicyDir, rule, when

TABLES = sorted((CASES / "decisions").glob("*.yaml"))


def _load(path: Path) -> dict[str, Any]:
    table: dict[str, Any] = yaml.safe_load(path.read_text())
    if "policy_file" in table:
        table["policy"] = (REPO / table["policy_file"]).read_text()
    return table


def _cases(casbin_only: bool = False) -> list[Any]:
    params = []
    for path in TABLES:
        table = _load(path)
        for number, case in enumerate(table["cases"], start=1):
            if casbin_only and case["by"] == "super user":
                continue  # decided before casbin is asked
            params.append(pytest.param(table, case, id=f"{path.stem}-{number}"))
    return params


def test_there_are_tables() -> None:
    assert len(TABLES) >= 9
    assert sum(len(_load(p)["cases"]) for p in TABLES) >= 120


@pytest.mark.parametrize(("table", "case"), _cases())
def test_decision(table: dict[str, Any], case: dict[str, Any], policy_dir: PolicyDir) -> None:
    directory = policy_dir(table["policy"])
    authorizer = Authorizer(PolicyStore(directory), super_users=table.get("super_users", []))
    request = when(case["when"])

    decision = authorizer.authorize(*request)

    assert case["then"] in ("allow", "deny")
    assert decision.allowed is (case["then"] == "allow"), decision.rule
    expected_by = case["by"]
    if expected_by == "default":
        assert (decision.rule, decision.acl) == (DEFAULT_DENY, None)
    elif expected_by == "super user":
        assert (decision.rule, decision.acl) == (SUPER_USER, None)
    else:
        assert decision.acl == rule(expected_by), decision.rule
        assert decision.rule == str(rule(expected_by))
    assert authorizer.authorize(*request) is decision  # the cache answers the second time
    assert authorizer.explain(*request) == decision


@pytest.mark.parametrize(("table", "case"), _cases(casbin_only=True))
def test_plain_casbin_agrees(table: dict[str, Any], case: dict[str, Any]) -> None:
    parsed = parse_policy(table["policy"])
    enforcer = reference_enforcer(
        MODEL_CONF, (r for _, r in parsed.rules), (m for _, m in parsed.members)
    )
    principal, host, rtype, name, op = when(case["when"])
    allowed = enforcer.enforce(principal, host, rtype.name, name, op.name)
    assert allowed is (case["then"] == "allow")
