"""Authorization benchmark: the gateway with casbin authorization on (a large policy,
many topics) against the plain gateway and direct, in one run.

``python -m bench.authz [--tenants N] [--filler-topics N] [--records N] [--rounds N]``

The policy is generated: ``--tenants`` tenants in the shape of policies/policy.csv
(producer, consumer and admin roles with PREFIXED grants, nested roles, a deny, a
few LITERAL grants and four member principals each), so a 500-tenant policy has
about 10,000 lines. The benchmark's principal is a member of tenant 0's admin role
and its topics and groups carry tenant 0's prefix. ``--filler-topics`` extra
one-partition topics spread over the tenants' prefixes make the cluster's metadata
large. Targets, alternating within each round:

- ``direct``          the brokers
- ``gateway``         the gateway without authorization (same listener principal)
- ``gateway-authz``   authorization on, decision cache on (the default, 100,000)
- ``gateway-authz-nocache``  authorization on, ``cache_size: 0`` (every check runs
  casbin's enforcer: the worst case, e.g. right after a policy change)

Results: ``bench/results/authz-latest.json``; the ratio that answers the question
is ``gateway-authz/gateway``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: bench/authz.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.variants import Variant, VariantBench, add_common_args, run, say
from gateway.devstack.kafka_cluster import KafkaCluster

REPO = Path(__file__).resolve().parent.parent
PRINCIPAL = "User:bench-app"


def prefix(tenant: int) -> str:
    return f"t{tenant:04d}."


def policy_lines(tenants: int) -> list[str]:
    """A policy shaped like policies/policy.csv, repeated for ``tenants`` tenants."""
    lines = [f"g, {PRINCIPAL}, Role:{prefix(0)}admins"]
    for t in range(tenants):
        p, role = prefix(t), f"Role:{prefix(t)}"
        lines += [
            f"p, {role}producers, TOPIC, PREFIXED, {p}, WRITE, *, allow",
            f"p, {role}producers, TRANSACTIONAL_ID, PREFIXED, {p}, WRITE, *, allow",
            f"p, {role}producers, CLUSTER, LITERAL, kafka-cluster, IDEMPOTENT_WRITE, *, allow",
            f"p, {role}consumers, TOPIC, PREFIXED, {p}, READ, *, allow",
            f"p, {role}consumers, GROUP, PREFIXED, {p}, READ, *, allow",
            f"p, {role}admins, TOPIC, PREFIXED, {p}, ALL, *, allow",
            f"p, {role}admins, GROUP, PREFIXED, {p}, ALL, *, allow",
            f"p, {role}admins, TOPIC, LITERAL, {p}audit, DELETE, *, deny",
            f"g, {role}admins, {role}producers",
            f"g, {role}admins, {role}consumers",
        ]
        reader = f"User:t{t}-reader"
        lines += [f"p, {reader}, TOPIC, LITERAL, {p}shared-{i}, READ, *, allow" for i in range(5)]
        lines += [f"g, User:t{t}-svc-{i}, {role}{kind}" for i, kind in
                  enumerate(("producers", "consumers", "admins", "consumers"))]  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.authz", description=__doc__)
    add_common_args(parser)
    parser.add_argument("--tenants", type=int, default=500, help="tenants in the policy")
    parser.add_argument("--filler-topics", type=int, default=300, help="extra topics")
    args = parser.parse_args(argv)

    lines = policy_lines(args.tenants)
    policy_dir_holder: list[Path] = []

    def prepare(cluster: KafkaCluster, workdir: Path) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        policy_dir = workdir / "policies"
        policy_dir.mkdir()
        shutil.copy(REPO / "policies" / "model.conf", policy_dir / "model.conf")
        (policy_dir / "policy.csv").write_text("\n".join(lines) + "\n")
        policy_dir_holder.append(policy_dir)
        for variant in bench.variants:
            if "authorization" in variant.sections:
                variant.sections["authorization"]["policy_dir"] = str(policy_dir)
        if args.filler_topics:
            say(f"creating {args.filler_topics} filler topics")
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
            names = [f"{prefix(i % args.tenants)}filler-{i}" for i in range(args.filler_topics)]
            for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
                future.result(timeout=120)

    listener = {"principal": PRINCIPAL}
    variants = [
        Variant("gateway", listener=listener),
        Variant("gateway-authz", {"authorization": {}}, listener),
        Variant("gateway-authz-nocache", {"authorization": {"cache_size": 0}}, listener),
    ]
    bench = VariantBench(args, variants, topic_prefix=prefix(0), group_prefix=prefix(0))
    say(f"policy: {len(lines)} lines for {args.tenants} tenants")
    pairs = [
        ("gateway-authz", "gateway"),
        ("gateway-authz-nocache", "gateway"),
        ("gateway", "direct"),
        ("gateway-authz", "direct"),
    ]
    code, _doc = run("authz", bench, pairs, {"policy_lines": len(lines)}, prepare)
    return code


if __name__ == "__main__":
    sys.exit(main())
