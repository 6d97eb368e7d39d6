"""Lint cases (cases/lint/cases.yaml): given a policy, exactly these problems."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from gateway.authz.lint import Problem, lint
from gateway.authz.policyfile import parse_policy

from .conftest import CASES

_EXPECT = re.compile(r"^(?P<severity>error|warning) (?P<line>\d+): (?P<text>.+)$")
LINT_CASES: list[dict[str, Any]] = yaml.safe_load((CASES / "lint" / "cases.yaml").read_text())


def _matches(expected: str, problem: Problem) -> bool:
    match = _EXPECT.match(expected)
    assert match is not None, f"bad expectation {expected!r}"
    return (
        problem.severity == match["severity"]
        and problem.line == int(match["line"])
        and match["text"] in problem.message
    )


@pytest.mark.parametrize("case", LINT_CASES, ids=[c["name"] for c in LINT_CASES])
def test_lint(case: dict[str, Any]) -> None:
    problems = lint(parse_policy(case["policy"], "policy.csv"), case.get("super_users", ()))
    unexplained = [p for p in problems if not any(_matches(e, p) for e in case["expect"])]
    missing = [e for e in case["expect"] if not any(_matches(e, p) for p in problems)]
    assert not unexplained and not missing, (unexplained, missing)


def test_problems_name_file_and_line() -> None:
    (problem,) = lint(parse_policy("p, nobody\n", "tenants.csv"))
    assert str(problem).startswith("tenants.csv:1: error: ")


def test_errors_only_skips_the_warnings() -> None:
    parsed = parse_policy("p, User:a, TOPIC, LITERAL, t, READ, *, allow\n" * 2)
    assert lint(parsed, warnings=False) == []
    assert [p.severity for p in lint(parsed)] == ["warning"]
