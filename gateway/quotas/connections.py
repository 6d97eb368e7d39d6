"""Connection limits: open connections and new connections per second, per client
address and per tenant. Counted by each gateway instance on its own (docs/quotas.md
says why); no I/O.
"""

from __future__ import annotations

from collections import Counter

from .bucket import TokenBucket
from .model import ConnectionLimits

ADDRESS_CONNECTIONS = "address_max_connections"
ADDRESS_RATE = "address_connection_rate"
TENANT_CONNECTIONS = "tenant_max_connections"
TENANT_RATE = "tenant_connection_rate"


class ConnectionLimiter:
    def __init__(self) -> None:
        self.by_address: Counter[str] = Counter()
        self.by_tenant: Counter[str] = Counter()
        self._rates: dict[str, TokenBucket] = {}

    def open(
        self,
        host: str,
        address: ConnectionLimits,
        tenant: str | None,
        tenant_limits: ConnectionLimits | None,
        now: float,
    ) -> str | None:
        """Count a new connection from ``host`` (and ``tenant`` when known), or say why not."""
        if _full(self.by_address[host], address):
            return ADDRESS_CONNECTIONS
        if tenant is not None and tenant_limits is not None:
            if _full(self.by_tenant[tenant], tenant_limits):
                return TENANT_CONNECTIONS
            if not self._take(f"tenant:{tenant}", tenant_limits, now):
                return TENANT_RATE
        if not self._take(f"ip:{host}", address, now):
            return ADDRESS_RATE
        self.by_address[host] += 1
        if tenant is not None:
            self.by_tenant[tenant] += 1
        return None

    def identify(self, tenant: str, limits: ConnectionLimits, now: float) -> str | None:
        """A counted connection's tenant became known (after authentication)."""
        if _full(self.by_tenant[tenant], limits):
            return TENANT_CONNECTIONS
        if not self._take(f"tenant:{tenant}", limits, now):
            return TENANT_RATE
        self.by_tenant[tenant] += 1
        return None

    def close(self, host: str, tenant: str | None) -> None:
        _decrement(self.by_address, host)
        if tenant is not None:
            _decrement(self.by_tenant, tenant)

    def _take(self, key: str, limits: ConnectionLimits, now: float) -> bool:
        rate = limits.connection_rate
        if rate is None:
            return True
        burst = max(1.0, rate)  # one second's worth
        bucket = self._rates.get(key)
        if bucket is None:
            if len(self._rates) > 100_000:
                self.prune(now)
            bucket = self._rates[key] = TokenBucket(rate, burst, now, floor=0.0)
        elif bucket.rate != rate:
            bucket.reconfigure(rate, burst, 0.0)
        return bucket.try_take(1.0, now)

    def prune(self, now: float) -> None:
        """Forget rate buckets that have refilled completely."""
        for key, bucket in list(self._rates.items()):
            if bucket.tokens + (now - bucket.updated) * bucket.rate >= bucket.burst:
                del self._rates[key]


def _full(count: int, limits: ConnectionLimits) -> bool:
    return limits.max_connections is not None and count >= limits.max_connections


def _decrement(counter: Counter[str], key: str) -> None:
    if counter[key] <= 1:
        counter.pop(key, None)
    else:
        counter[key] -= 1
