"""The indexed peer lookups give what the plain definitions give (issue 17 throughput).

``TenantFactors.factor`` reads a principal's peer median off the tenant-hour's ratios
sorted once; ``Population.peers`` reads a tenant's members off an index. Both are
checked here against the definitions they replace, on random and hand-made inputs.
"""

from __future__ import annotations

import random
import statistics

from gateway.analytics.detect.newcomers import Population
from gateway.analytics.detect.peers import TenantFactors


def _plain_factor(entries: list[tuple[str, float]], principal: str) -> tuple[float, int]:
    peers = [v for name, v in entries if name != principal]
    return (float(statistics.median(peers)), len(peers)) if peers else (1.0, 0)


def test_the_factor_is_the_median_of_the_peers_ratios() -> None:
    entries = [("a", 3.0), ("b", 1.0), ("c", 2.0), ("d", 5.0)]
    factors = TenantFactors({("t", 0): entries})
    assert factors.factor("t", 0, "a") == (2.0, 3)  # 1, 2, 5
    assert factors.factor("t", 0, "d") == (2.0, 3)  # 1, 2, 3
    assert factors.factor("t", 0, "b") == (3.0, 3)  # 2, 3, 5
    assert factors.factor("t", 0, "outsider") == (2.5, 4)
    assert factors.factor("t", 1, "a") == (1.0, 0)  # an hour nobody was active in
    assert factors.factor(None, 0, "a") == (1.0, 0)
    assert TenantFactors({("t", 0): [("a", 4.0)]}).factor("t", 0, "a") == (1.0, 0)


def test_the_factor_matches_the_plain_median_on_random_tenant_hours() -> None:
    rng = random.Random(17)
    for _ in range(2000):
        names = [f"p{i}" for i in range(rng.randint(0, 9))]
        entries = [
            (name, rng.choice((0.5, 1.0, 2.0)) if rng.random() < 0.5 else rng.random() * 5)
            for name in names
        ]
        if names and rng.random() < 0.1:
            entries.append((names[0], rng.random()))  # a principal twice: the plain way
        rng.shuffle(entries)
        factors = TenantFactors({("t", 7): entries})
        for who in [*names, "nobody"]:
            got = factors.factor("t", 7, who)
            assert got == _plain_factor(entries, who)
            assert type(got[0]) is float


def test_peers_are_the_other_principals_of_the_tenant_in_order() -> None:
    tenants = {"a1": "a", "b1": "b", "a2": "a", "x": None, "a3": "a", "b2": "b"}
    people = Population(tenants, {}, {}, {})
    assert people.peers("a2") == ["a1", "a3"]
    assert people.peers("b1") == ["b2"]
    assert people.peers("x") == []
    assert people.peers("unknown") == []
    for who in tenants:
        tenant = tenants[who]
        plain = [p for p, t in tenants.items() if t == tenant and p != who]
        assert people.peers(who) == (plain if tenant is not None else [])


def test_rose_matches_the_plain_rule_on_random_tenant_hours() -> None:
    """``rose`` answers 1.0 without the median in tenant-hours where nobody's peers can
    reach the factor; elsewhere, and for a principal with two ratios, the exact rule."""
    from gateway.analytics.detect.context import Thresholds

    rng = random.Random(31)
    for _ in range(1500):
        t = Thresholds(
            tenant_factor_min=rng.choice((1.0, 1.5, 2.0, 3.0)),
            tenant_peers_min=rng.randint(1, 4),
        )
        ratios: dict[tuple[str, int], list[tuple[str, float]]] = {}
        for hour in range(3):
            names = [f"p{i}" for i in range(rng.randint(0, 8))]
            entries = [(n, rng.choice((1.0, 1.5, 2.0, 3.0, rng.random() * 4))) for n in names]
            if names and rng.random() < 0.1:
                entries.append((names[-1], rng.random() * 4))  # twice: the plain way
            rng.shuffle(entries)
            ratios[("t", hour)] = entries
        factors = TenantFactors(ratios)
        for hour in range(4):  # hour 3: nobody active
            for who in [f"p{i}" for i in range(9)]:
                value, peers = _plain_factor(ratios.get(("t", hour), []), who)
                plain = (
                    value if peers >= t.tenant_peers_min and value >= t.tenant_factor_min else 1.0
                )
                assert factors.rose("t", hour, who, t) == plain
        assert factors.rose(None, 0, "p0", t) == 1.0
