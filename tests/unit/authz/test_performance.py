"""Decision cost with 1,000 rules: cached (the hot path), uncached, and plain casbin.

Bounds are loose (shared CI machines); the figures are printed (``pytest -s``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.authz.casbin_model import MODEL_CONF, reference_enforcer
from gateway.authz.engine import Authorizer
from gateway.authz.model import Operation, ResourceType
from gateway.authz.policyfile import parse_policy
from gateway.authz.store import PolicyStore

from .conftest import PolicyDir

TENANTS = 100


def thousand_rules() -> str:
    """100 tenants x 10 rules, with roles, denies, host limits and a few wildcards."""
    lines = []
    for t in range(TENANTS):
        role = f"Role:tenant-{t}"
        lines += [
            f"p, {role}, TOPIC, PREFIXED, tenant-{t}., WRITE, *, allow",
            f"p, {role}, TOPIC, PREFIXED, tenant-{t}., READ, *, allow",
            f"p, {role}, GROUP, PREFIXED, tenant-{t}., READ, *, allow",
            f"p, {role}, TRANSACTIONAL_ID, PREFIXED, tenant-{t}., WRITE, *, allow",
            f"p, {role}, TOPIC, LITERAL, tenant-{t}.audit, DELETE, *, deny",
            f"p, User:svc-{t}, TOPIC, LITERAL, tenant-{t}.orders, ALL, 10.{t}.0.0/16, allow",
            f"p, User:svc-{t}, TOPIC, LITERAL, tenant-{t}.orders, WRITE, 10.{t}.9.0/24, deny",
            f"p, User:svc-{t}, CLUSTER, LITERAL, kafka-cluster, IDEMPOTENT_WRITE, *, allow",
            f"p, User:ops-{t}, TOPIC, PREFIXED, tenant-{t}., ALTER_CONFIGS, *, allow",
            f"p, User:ops-{t}, GROUP, LITERAL, tenant-{t}.admin, ALL, *, allow",
            f"g, User:svc-{t}, {role}",
            f"g, User:ops-{t}, {role}",
        ]
    return "\n".join(lines) + "\n"


def _per_call_us(fn: Callable[[], object], calls: int, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - started)
    return best / calls * 1e6


def test_decision_cost_with_1000_rules(policy_dir: PolicyDir) -> None:
    text = thousand_rules()
    directory = policy_dir(text)
    started = time.perf_counter()
    authorizer = Authorizer(PolicyStore(directory))
    load_ms = (time.perf_counter() - started) * 1e3
    assert len(authorizer.policy.rules) == 1000

    request = ("User:svc-42", "10.42.1.7", ResourceType.TOPIC, "tenant-42.orders", Operation.WRITE)
    decision = authorizer.authorize(*request)
    assert decision.allowed and "Role:tenant-42" in decision.rule
    cached = _per_call_us(lambda: authorizer.authorize(*request), 20_000)
    uncached = _per_call_us(lambda: authorizer.explain(*request), 300)
    unrelated = ("User:svc-42", "10.42.1.7", ResourceType.TOPIC, "tenant-7.orders", Operation.READ)
    assert authorizer.explain(*unrelated).acl is None  # no candidate rule: casbin is not asked
    no_candidates = _per_call_us(lambda: authorizer.explain(*unrelated), 300)
    denied = ("User:svc-42", "10.42.9.7", ResourceType.TOPIC, "tenant-42.orders", Operation.WRITE)
    assert authorizer.explain(*denied).acl is not None
    uncached_deny = _per_call_us(lambda: authorizer.explain(*denied), 300)

    (directory / "policy.csv").write_text(text + "p, User:new, TOPIC, LITERAL, t, READ, *, allow\n")
    started = time.perf_counter()
    assert authorizer.reload_if_changed(fresh=True)
    reload_ms = (time.perf_counter() - started) * 1e3

    parsed = parse_policy(text)
    plain = reference_enforcer(
        MODEL_CONF, (r for _, r in parsed.rules), (m for _, m in parsed.members)
    )
    args = ("User:svc-42", "10.42.1.7", "TOPIC", "tenant-42.orders", "WRITE")
    assert plain.enforce(*args) is True
    plain_us = _per_call_us(lambda: plain.enforce(*args), 5, repeats=3)

    print(
        f"\n1,000 rules: start {load_ms:.0f} ms, reload {reload_ms:.0f} ms; "
        f"cached decision {cached:.2f} us; uncached: allow {uncached:.0f} us, "
        f"deny by a rule {uncached_deny:.0f} us, no candidate rule {no_candidates:.1f} us; "
        f"plain casbin over all rules {plain_us:.0f} us ({plain_us / uncached:.0f}x the engine)"
    )
    assert cached < 20
    assert uncached < 5_000 and uncached_deny < 5_000 and no_candidates < 1_000
    assert uncached < plain_us
