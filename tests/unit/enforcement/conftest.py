from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.authz.engine import Authorizer
from gateway.config import AuthorizationConfig

POLICIES = Path(__file__).parents[3] / "policies"
MakeAuthorizer = Callable[..., Authorizer]


@pytest.fixture
def make_authorizer(tmp_path: Path) -> MakeAuthorizer:
    """A real casbin Authorizer over the shipped model and the given policy lines."""

    def make(lines: list[str], super_users: list[str] | None = None) -> Authorizer:
        directory = tmp_path / f"policy-{len(list(tmp_path.iterdir()))}"
        directory.mkdir()
        shutil.copy(POLICIES / "model.conf", directory / "model.conf")
        (directory / "policy.csv").write_text("\n".join(lines) + "\n")
        config = AuthorizationConfig(policy_dir=directory, super_users=super_users or [])
        return Authorizer.from_config(config)

    return make
