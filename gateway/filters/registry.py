"""One entry per Kafka API key: everything the gateway does with that API, in one place.

The per-API knowledge itself stays with the feature that owns it (authorization units
in ``enforcement.units``, the resource table in ``enforcement.resources``, address
rewriters in ``addresses.rewrite``, quota charges in ``quotas.throttle``, licence
limits in ``quotas.licence_apis``, the local stores' APIs, the built-in stages of
``BUILTIN_CHAIN``); ``REGISTRY`` gathers it per API key so that one lookup answers
"what happens to a request of API N": which resources and operations are checked, how
partial denials come back, which addresses are rewritten, how it is charged, whether
the gateway answers it from its own stores, what the access log records.
``python -m gateway.filters.registry`` prints it as docs/apis.md, and
tests/unit/filters/test_registry.py keeps that page and the table in step with the
code and with every API key the gateway advertises.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from ..addresses.rewrite import REWRITERS
from ..enforcement import advertised
from ..enforcement.acl_admin import ACL_APIS
from ..enforcement.resources import RESOURCE_FIELDS
from ..enforcement.units import AUTHZ_HIDDEN, AUTHZ_MAX_VERSION, UNITS
from ..protocol import apis
from ..protocol.refusal import ENTRIES
from ..quotas.kafka_messages import CLIENT_QUOTA_APIS
from ..quotas.licence_apis import LICENCE_APIS
from ..sasl.connection import SASL_APIS

# The stages a request meets, in order (``Session.on_request``), and the response's
# (``Session._transform``). Operators' filters are one stage of each.
BUILTIN_CHAIN: tuple[tuple[str, str], ...] = (
    ("versions", "ApiVersions intersected; a version outside the advertised range refused"),
    ("authentication", "SASL handshake and steps; nothing else before SASL succeeded"),
    (
        "operator filters",
        "the namespace filter first when configured (docs/namespaces.md:"
        " tenant names to cluster names), then the configured filters (docs/filters.md), in order",
    ),
    ("fetch sessions", "Fetch: the connection's own sessions, authorized whole"),
    ("authorization", "the API's unit checks every resource; denied parts answered here"),
    ("quota admin and licences", "ClientQuotas answered from the quota store; plan limits"),
    ("throttling", "request and byte charges; KIP-219 throttle time and mute"),
    ("forward", "to the broker the listener port stands for, in request order"),
)
RESPONSE_CHAIN: tuple[tuple[str, str], ...] = (
    ("fetch sessions", "the broker's session id and epoch noted"),
    ("throttling", "Fetch: response bytes charged"),
    ("authorization", "partial denials merged back in; answers checked again"),
    ("operator filters", "the configured filters in reverse order, the namespace filter last"),
    ("addresses", "broker addresses replaced by public endpoints"),
    ("throttle time", "the larger of the broker's and the gateway's"),
    ("access log", "one exchange per request, when its response leaves"),
)


@dataclass(frozen=True, slots=True)
class ApiEntry:
    """What the gateway does with one API key."""

    key: int
    name: str
    versions: tuple[int, int] | None  # offered with authorization on (None: not offered)
    authorization: str  # how it is authorized
    resources: Mapping[str, str]  # request field -> how it is handled (resources.py)
    denials: str  # how denied parts come back (the refusal table's entries)
    local: str | None  # answered from the gateway's own store, if so
    rewrites_addresses: bool
    charges: tuple[str, ...]  # quota charges
    access_log: str


def _authorization(key: int) -> str:
    if key in SASL_APIS:
        return "none: the SASL exchange itself"
    if key in ACL_APIS:
        return "the caller's ALTER/DESCRIBE on the policy (enforcement/acl_admin.py)"
    if key in AUTHZ_HIDDEN:
        return "not offered: names topics by id only"
    unit = UNITS.get(key)
    if unit is None:
        return "not offered (no unit: denied)"
    qualname = getattr(unit, "__qualname__", "unit")
    name = qualname.split(".<locals>", 1)[0] + ("(…)" if "<locals>" in qualname else "")
    if name == "passthrough":
        return "none needed (passthrough)"
    cap = AUTHZ_MAX_VERSION.get(key)
    capped = f"; versions above v{cap} not offered" if cap is not None else ""
    return f"unit `{name}` (enforcement/units.py){capped}"


def _denials(key: int) -> str:
    rows = ENTRIES.get(key, ())
    if not rows:
        return "whole request: the error at the top level"
    lists = ", ".join(f"`{row.request}` → `{row.response}`" for row in rows)
    return f"per entry ({lists}): denied entries get the error, the rest the broker's answer"


def _local(key: int) -> str | None:
    if key in ACL_APIS:
        return "policy store (ACLs as casbin rules)"
    if key in CLIENT_QUOTA_APIS:
        return "quota store (with quotas configured)"
    if key in LICENCE_APIS:
        return "forwarded after the plan's licence limits (with quotas configured)"
    return None


def _charges(key: int) -> tuple[str, ...]:
    if key in SASL_APIS or key == apis.API_VERSIONS:
        return ()
    if key == apis.PRODUCE:
        return ("request (when forwarded)", "produce bytes")
    if key in (apis.FETCH, apis.SHARE_FETCH):
        return ("request (when forwarded)", "fetch bytes (on the response)")
    return ("request (when forwarded)",)


def _access_log(key: int) -> str:
    if key in SASL_APIS:
        return "auth record (success/failure, claimed name)"
    if key == apis.FETCH:
        return "exchange: the session's effective topics and partitions"
    return "exchange: the resources the request names"


@cache
def registry() -> Mapping[int, ApiEntry]:
    """Every API key the gateway knows, in key order."""
    entries: dict[int, ApiEntry] = {}
    for key, spec in sorted(apis.gateway_apis().items()):
        offered = advertised(key) if key not in SASL_APIS else spec
        entries[key] = ApiEntry(
            key=key,
            name=spec.name,
            versions=None if offered is None else (offered.min_version, offered.max_version),
            authorization=_authorization(key),
            resources=RESOURCE_FIELDS.get(key, {}),
            denials=_denials(key),
            local=_local(key),
            rewrites_addresses=key in REWRITERS,
            charges=_charges(key),
            access_log=_access_log(key),
        )
    return entries


def markdown() -> str:
    """docs/apis.md: the chain, then one section per API key."""
    lines = [
        "# What the gateway does with each Kafka API",
        "",
        "Generated from `gateway/filters/registry.py` "
        "(`python -m gateway.filters.registry > docs/apis.md`); a test keeps it current.",
        "",
        "## The chain a request meets",
        "",
        *(f"{n}. **{stage}**: {what}" for n, (stage, what) in enumerate(BUILTIN_CHAIN, 1)),
        "",
        "## The chain a response meets",
        "",
        *(f"{n}. **{stage}**: {what}" for n, (stage, what) in enumerate(RESPONSE_CHAIN, 1)),
        "",
        "## Per API key",
        "",
    ]
    for entry in registry().values():
        versions = "not offered" if entry.versions is None else "v{} to v{}".format(*entry.versions)
        lines += [
            f"### {entry.key} {entry.name}",
            "",
            f"- offered with authorization on: {versions}",
            f"- authorization: {entry.authorization}",
            f"- partial denials: {entry.denials}",
        ]
        if entry.local:
            lines.append(f"- answered by the gateway: {entry.local}")
        lines.append(f"- broker addresses rewritten: {'yes' if entry.rewrites_addresses else 'no'}")
        lines.append(f"- quota charges: {', '.join(entry.charges) or 'none'}")
        lines.append(f"- access log: {entry.access_log}")
        for field, handling in entry.resources.items():
            lines.append(f"- `{field}`: {handling}")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown())
