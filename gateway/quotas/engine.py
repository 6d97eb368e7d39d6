"""The quota engine: one per gateway process.

``charge`` and ``throttle_for`` are synchronous and never wait for Redis: they
spend local leases and estimate the shared bucket from the last sync. ``run`` is
the background task that syncs leases (one pipelined round trip per tick),
follows settings changes, reconnects to Redis with backoff and applies the
``on_redis_failure`` policy while it cannot. Nothing here raises into the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from .booking import CLOSED, Booking, Closed, Found, Hot, Unset
from .bucket import LeasedBucket, TokenBucket, floor_for, throttle_ms
from .connections import ConnectionLimiter
from .kafka_entities import (
    AlterEntry,
    DescribedEntry,
    Entity,
    FilterComponent,
    alter_client_quotas,
    describe_client_quotas,
)
from .licence import TenantUsage, tenant_usage
from .model import ConnectionLimits, Limit, Plan, QuotaKind, QuotaSettings, Resolver, Subject
from .redis_sync import SharedBuckets, Take
from .settings import QuotaConfig
from .store import QuotaStore, StoreError, open_store

log = logging.getLogger("kgw.quotas")
Clock = Callable[[], float]
MIN_BACKOFF_S = 0.05
IDLE_SCAN_S = 1.0
CACHE_MAX = 100_000
_THROTTLED = {kind: f"throttled_total.{kind.value}" for kind in QuotaKind}
_THROTTLE_MS = {kind: f"throttle_ms_total.{kind.value}" for kind in QuotaKind}
_CHARGED = {kind: f"charged_total.{kind.value}" for kind in QuotaKind}  # under a quota only


class QuotaEngine:
    def __init__(
        self,
        cfg: QuotaConfig,
        store: QuotaStore,
        shared: SharedBuckets | None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.cfg = cfg
        self.store = store
        self.fail_mode = cfg.on_redis_failure
        self.redis_state = "connecting" if shared is not None else "absent"
        self.counters: Counter[str] = Counter()
        self._shared = shared
        self._clock = clock
        self._cap = float(cfg.max_throttle_ms)
        self._resolver = Resolver(QuotaSettings(), cfg.plans, cfg.default_plan, cfg.default_burst_s)
        self._cache: dict[tuple[Subject, QuotaKind], Limit | None] = {}
        # (subject, kind) -> (limit, its bucket in the current mode); emptied whenever a
        # bucket is dropped, the settings change or the Redis state does
        self._hot: dict[tuple[Subject, QuotaKind], Hot] = {}
        self._generation = 0  # moves on whenever ``_hot`` is emptied (``Booking``)
        self._leased: dict[str, LeasedBucket] = {}
        self._local: dict[str, TokenBucket] = {}  # alone, or failing open
        self._due: set[str] = set()
        # the syncer, idle until a lease falls due (``watch_due``): resolved by ``charge``
        self._due_waiter: asyncio.Future[None] | None = None
        self._connections = ConnectionLimiter()
        self._address_defaults = ConnectionLimits(
            cfg.address_limits.max_connections, cfg.address_limits.connection_rate
        )
        self._settings_due = 0.0
        self._idle_scan_at = 0.0
        self._errors_logged = 0
        self._mode()

    @classmethod
    def from_config(
        cls, cfg: QuotaConfig, *, store: QuotaStore | None = None, clock: Clock = time.monotonic
    ) -> QuotaEngine:
        """Without ``redis_url`` the settings file is read now (``StoreError`` if unusable)."""
        shared = None
        if cfg.redis_url is not None:
            shared = SharedBuckets(cfg.redis_url, cfg.key_prefix, cfg.redis_timeout_s)
        engine = cls(cfg, store or open_store(cfg), shared, clock)
        if shared is None:
            engine.apply_settings(engine.store.load())
        return engine

    # -- state -------------------------------------------------------------------

    @property
    def redis_up(self) -> bool:
        return self.redis_state == "up"

    @property
    def settings(self) -> QuotaSettings:
        return self._resolver.settings

    def apply_settings(self, settings: QuotaSettings) -> None:
        self._resolver = Resolver(
            settings, self.cfg.plans, self.cfg.default_plan, self.cfg.default_burst_s
        )
        self._cache.clear()
        self._forget_hot()
        self.counters["settings_loaded_total"] += 1

    def settings_changed(self) -> None:
        """Re-read the settings at the next tick (after a change made through this process)."""
        self._settings_due = 0.0
        self._wake_syncer()

    def plan_for(self, tenant: str | None) -> Plan | None:
        return self._resolver.plan_for(tenant)

    def limit(self, subject: Subject, kind: QuotaKind) -> Limit | None:
        """The quota a charge of ``kind`` by ``subject`` falls under (most specific wins)."""
        key = (subject, kind)
        try:
            return self._cache[key]
        except KeyError:
            pass
        if len(self._cache) >= CACHE_MAX:
            self._cache.clear()
        limit = self._cache[key] = self._resolver.limit(subject, kind)
        return limit

    def _mode(self) -> None:
        down = self._shared is not None and self.redis_state == "down"
        self._leasing = self._shared is not None and not down
        self._closed = down and self.fail_mode == "closed"
        self._share = self.cfg.expected_instances if down else 1

    # -- the hot path ------------------------------------------------------------

    def charge(
        self, subject: Subject, kind: QuotaKind, amount: float, now: float | None = None
    ) -> float:
        """Book ``amount``; the throttle time in ms the client must now wait (0: none)."""
        try:
            return self._charge(subject, kind, amount, self._clock() if now is None else now)
        except Exception:
            return self._internal_error()

    def charge_request(
        self, subject: Subject, produce_bytes: int | None = None, booking: Booking | None = None
    ) -> float:
        """A forwarded request, booked at one reading of the clock: one ``REQUESTS`` and,
        for a Produce, its ``produce_bytes`` of ``PRODUCE_BYTES``; the longer throttle.
        ``booking``: the connection's memo of its buckets (``booking``), else looked up."""
        if booking is None:
            booking = Booking()
        try:  # each booking as ``charge`` makes it: a failure of one spares the other
            t = self._clock()
            if booking.generation != self._generation or booking.subject is not subject:
                booking.reset(self._generation, subject)
            entry = booking.requests
            if isinstance(entry, Unset):
                entry = booking.requests = self._entry(subject, QuotaKind.REQUESTS, t)
            ms = self._book(QuotaKind.REQUESTS, entry, 1, t)
        except Exception:
            return self._internal_error()
        if produce_bytes is None:
            return ms
        try:
            entry = booking.produced
            if isinstance(entry, Unset):
                entry = booking.produced = self._entry(subject, QuotaKind.PRODUCE_BYTES, t)
            produced = self._book(QuotaKind.PRODUCE_BYTES, entry, produce_bytes, t)
        except Exception:
            produced = self._internal_error()
        return max(ms, produced)

    def _charge(self, subject: Subject, kind: QuotaKind, amount: float, t: float) -> float:
        hot = self._hot.get((subject, kind))
        if hot is None:
            found = self._entry(subject, kind, t)
            if found is None or isinstance(found, Closed):
                return self._book(kind, found, amount, t)
            hot = found
            if len(self._hot) >= CACHE_MAX:
                self._forget_hot()
            self._hot[(subject, kind)] = hot
        return self._book(kind, hot, amount, t)

    def _entry(self, subject: Subject, kind: QuotaKind, t: float) -> Found:
        """The limit of ``kind`` for ``subject`` and its bucket (None: no quota); ``CLOSED``
        when it falls under a quota but Redis is down and the policy fails closed."""
        limit = self.limit(subject, kind)
        if limit is None:
            return None
        bucket = self._bucket(limit, t)
        return CLOSED if bucket is None else (limit, bucket)

    def _book(self, kind: QuotaKind, entry: Found, amount: float, t: float) -> float:
        if entry is None:
            return 0.0
        if isinstance(entry, Closed):
            return self._throttled(kind, self._cap)
        limit, bucket = entry
        deficit = bucket.charge(amount, t)
        self.counters[_CHARGED[kind]] += int(amount)
        if isinstance(bucket, LeasedBucket) and bucket.needs_sync():
            self._due.add(limit.bucket)
            if self._due_waiter is not None:
                self._wake_syncer()
        if deficit <= 0:
            return 0.0
        return self._throttled(kind, throttle_ms(deficit, bucket.rate, self._cap))

    def _forget_hot(self) -> None:
        """Drop every looked-up bucket; connections' ``Booking`` memos lapse with them."""
        self._hot.clear()
        self._generation += 1

    def throttle_for(self, subject: Subject, kind: QuotaKind, now: float | None = None) -> float:
        """The throttle a request would get right now, booking nothing (for a Fetch that
        is answered empty, or a KIP-599 mutation check)."""
        try:
            limit = self.limit(subject, kind)
            if limit is None:
                return 0.0
            t = self._clock() if now is None else now
            bucket = self._bucket(limit, t)
            if bucket is None:
                return self._cap
            return throttle_ms(bucket.deficit(t), bucket.rate, self._cap)
        except Exception:
            return self._internal_error()

    def _bucket(self, limit: Limit, now: float) -> TokenBucket | LeasedBucket | None:
        if self._leasing:
            leased = self._leased.get(limit.bucket)
            if leased is None or leased.rate != limit.rate or leased.burst != limit.burst:
                leased = self._new_leased(limit, leased, now)
            return leased
        if self._closed:
            return None
        local = self._local.get(limit.bucket)
        rate, burst = limit.rate / self._share, limit.burst / self._share
        if local is None or local.rate != rate or local.burst != burst:
            floor = floor_for(rate, self._cap)
            if local is None:
                local = self._local[limit.bucket] = TokenBucket(rate, burst, now, floor)
            else:
                local.reconfigure(rate, burst, floor)
        return local

    def _new_leased(self, limit: Limit, old: LeasedBucket | None, now: float) -> LeasedBucket:
        floor = floor_for(limit.rate, self._cap)
        chunk = min(limit.burst, limit.rate * self.cfg.lease_fraction)
        if old is not None:
            old.reconfigure(limit.rate, limit.burst, floor, chunk)
            return old
        bucket = self._leased[limit.bucket] = LeasedBucket(
            limit.rate, limit.burst, floor, chunk, now, self.cfg.expected_instances
        )
        return bucket

    def _throttled(self, kind: QuotaKind, ms: float) -> float:
        self.counters[_THROTTLED[kind]] += 1
        self.counters[_THROTTLE_MS[kind]] += round(ms)
        return ms

    def _internal_error(self) -> float:
        self.counters["internal_errors_total"] += 1
        if self._errors_logged < 10:
            self._errors_logged += 1
            log.exception("quota check failed; not throttling", extra={"event": "quota_error"})
        return 0.0

    # -- connections -------------------------------------------------------------

    def connection_opened(
        self, host: str, tenant: str | None = None, now: float | None = None
    ) -> str | None:
        """Count a new connection; a refusal reason (close it, log it) or None."""
        try:
            t = self._clock() if now is None else now
            address = self._resolver.address_connections(host, self._address_defaults)
            limits = self._resolver.tenant_connections(tenant) if tenant is not None else None
            reason = self._connections.open(host, address, tenant, limits, t)
        except Exception:
            self._internal_error()
            return None
        if reason is not None:
            self.counters[f"connections_refused_total.{reason}"] += 1
        return reason

    def connection_identified(self, tenant: str, now: float | None = None) -> str | None:
        """A counted connection's tenant is now known (after SASL); refusal reason or None.
        On None, pass ``tenant`` to ``connection_closed`` later."""
        try:
            t = self._clock() if now is None else now
            limits = self._resolver.tenant_connections(tenant)
            reason = self._connections.identify(tenant, limits, t)
        except Exception:
            self._internal_error()
            return None
        if reason is not None:
            self.counters[f"connections_refused_total.{reason}"] += 1
        return reason

    def connection_closed(self, host: str, tenant: str | None = None) -> None:
        """Undo ``connection_opened`` (and ``connection_identified`` when ``tenant`` is given)."""
        with contextlib.suppress(Exception):
            self._connections.close(host, tenant)

    # -- licence and Kafka's ClientQuotas APIs ------------------------------------

    def usage(self, tenant: str, topics: Iterable[tuple[str, int]]) -> TenantUsage:
        return tenant_usage(tenant, topics, self.cfg.topic_prefix)

    def describe_client_quotas(
        self, components: Sequence[FilterComponent], strict: bool
    ) -> list[DescribedEntry]:
        return describe_client_quotas(self.settings, components, strict)

    async def alter_client_quotas(
        self, entries: Sequence[AlterEntry], actor: str, validate_only: bool = False
    ) -> list[tuple[Entity, int, str | None]]:
        """Change the store (in a worker thread; hooks run there) and reload at once, so a
        Describe right after on this instance sees the change."""
        results = await asyncio.to_thread(
            alter_client_quotas, self.store, entries, actor, validate_only
        )
        if validate_only or not any(code == 0 for _, code, _ in results):
            return results
        try:
            self.apply_settings(await asyncio.to_thread(self.store.load))
        except StoreError:  # the background task reloads once the store answers again
            self.settings_changed()
        return results

    # -- health ------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        values: dict[str, float] = dict(self.counters)
        values["redis_configured"] = float(self._shared is not None)
        values["redis_up"] = float(self.redis_up)
        values["fail_closed"] = float(self.fail_mode == "closed")
        values["degraded"] = float(self.redis_state == "down")
        values["buckets_shared"] = float(len(self._leased))
        values["buckets_local"] = float(len(self._local))
        values["connections_open"] = float(sum(self._connections.by_address.values()))
        return values

    # -- the background task -----------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Sync leases, follow settings, reconnect; returns when ``stop`` is set."""
        from .syncer import run_alone, run_shared

        if self._shared is None:
            await run_alone(self, stop)
        else:
            await run_shared(self, self._shared, stop)

    # used by the syncer ------------------------------------------------------------

    def prune(self, now: float) -> None:
        """Forget local buckets that have refilled completely (as good as new)."""
        for key, bucket in list(self._local.items()):
            if bucket.tokens + (now - bucket.updated) * bucket.rate >= bucket.burst:
                del self._local[key]
                self._forget_hot()
        self._connections.prune(now)

    def set_redis_state(self, state: str, reason: str | None = None) -> None:
        """One log line per change of state; buckets of the old state are dropped."""
        if state == self.redis_state:
            return
        self.redis_state = state
        self._mode()
        self._forget_hot()
        self._local.clear()  # fail-open buckets start afresh each outage
        if state == "down":  # leases and debts are the shared bucket's business now
            self._leased.clear()
            self._due.clear()
        self.counters[f"redis_{state}_total"] += 1
        if state == "down":
            log.warning(
                "quota Redis unavailable; failing %s until it is back",
                self.fail_mode,
                extra={"event": "quota_redis_down", "reason": reason},
            )
        else:
            log.info("quota Redis available", extra={"event": "quota_redis_up"})

    def takes_due(self, now: float) -> list[tuple[LeasedBucket, Take, bool]]:
        """The buckets the next sync handles: low leases, and (once a second) idle ones
        whose lease goes back to the shared bucket."""
        due, self._due = self._due, set()
        scan = now >= self._idle_scan_at
        if scan:
            self._idle_scan_at = now + IDLE_SCAN_S
        work: list[tuple[LeasedBucket, Take, bool]] = []
        for key in list(self._leased) if scan else due:
            bucket = self._leased.get(key)
            if bucket is None:
                continue
            release = scan and bucket.used_at < now - self.cfg.lease_idle_s
            if not release and key not in due:
                continue
            debit, want = bucket.sync_request(release=release)
            if release and debit == 0:
                del self._leased[key]
                self._forget_hot()
                continue
            take = Take(key, bucket.rate, bucket.burst, bucket.floor, debit, want)
            work.append((bucket, take, release))
        return work

    def now(self) -> float:
        return self._clock()

    def synced(
        self, work: list[tuple[LeasedBucket, Take, bool]], replies: list[tuple[float, float]]
    ) -> None:
        now = self._clock()
        for (bucket, take, release), (grant, tokens) in zip(work, replies, strict=True):
            bucket.synced(take.debit, grant, tokens, now)
            if release and bucket.lease == 0 and self._leased.get(take.bucket) is bucket:
                del self._leased[take.bucket]
                self._forget_hot()
            self.counters["leased_total"] += round(grant)
        self.counters["syncs_total"] += 1

    def has_due(self) -> bool:
        """A lease is low (or in debt): the next sync has work."""
        return bool(self._due)

    def next_check(self) -> float:
        """When the syncer must look again though no lease falls due: the next settings
        check or scan for idle leases."""
        return min(self._settings_due, self._idle_scan_at)

    def watch_due(self) -> asyncio.Future[None]:
        """A future resolved as soon as a lease falls due (or the settings must be re-read
        now); the syncer waits on it instead of waking every ``sync_interval_s``."""
        waiter = self._due_waiter = asyncio.get_running_loop().create_future()
        if self._due or self._settings_due == 0.0:
            waiter.set_result(None)
        return waiter

    def unwatch_due(self) -> None:
        self._due_waiter = None

    def _wake_syncer(self) -> None:
        waiter = self._due_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def settings_check_due(self, now: float) -> bool:
        if now < self._settings_due:
            return False
        self._settings_due = now + self.cfg.settings_refresh_s
        return True


async def wait_for_stop(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less when ``stop`` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
