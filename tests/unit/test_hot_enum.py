"""``HotEnum``: enums looked up per request hash in C, and still behave as enums."""

from __future__ import annotations

import copy
import pickle

import pytest

from gateway.core.states import State
from gateway.enums import HotEnum
from gateway.quotas.model import QuotaKind


@pytest.mark.parametrize("cls", [State, QuotaKind])
def test_hot_path_enums_hash_by_identity(cls: type[HotEnum]) -> None:
    assert issubclass(cls, HotEnum)
    for member in cls:
        assert hash(member) == object.__hash__(member)
        assert {member: 1}[member] == 1
        assert cls(member.value) is member and cls[member.name] is member
        assert pickle.loads(pickle.dumps(member)) is member
        assert copy.deepcopy(member) is member


def test_members_stay_distinct_keys() -> None:
    table = {kind: kind.value for kind in QuotaKind}
    assert len(table) == len(QuotaKind)
    assert [table[kind] for kind in QuotaKind] == [kind.value for kind in QuotaKind]
    assert QuotaKind.REQUESTS != "requests"  # an Enum, not a str: no cross-type equality
    assert State.OPEN in frozenset({State.OPEN, State.CLOSED})
    assert State.NEW not in frozenset({State.OPEN, State.CLOSED})
