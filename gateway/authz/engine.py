"""The authorizer the gateway asks on every request: casbin behind a per-version cache.

``authorize`` answers from an LRU cache keyed by the request's five values; each
policy version has its own cache, so a new version never sees an old answer.
``reload_if_changed`` (cheap: two ``stat`` calls) swaps in a new version when the
files changed and still lint clean; a broken policy is rejected with one
``policy_rejected`` log line and the last good version stays in force. ``watch``
runs that on a timer and, with Redis configured, tells the other instances about
this instance's changes and reloads on theirs.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..filewatch import FilePoller
from .casbin_model import CompiledPolicy, ModelError
from .lint import errors, lint
from .model import DEFAULT_DENY, SUPER_USER, Decision, Operation, Permission, ResourceType
from .notify import Notifier, RedisNotifier
from .store import PolicyChange, PolicyError, PolicyFiles, PolicyStore

if TYPE_CHECKING:
    from ..config import AuthorizationConfig

log = logging.getLogger("kgw.authz")

RECHECK_S = 30.0  # the files are read again this often even when no change was seen
_SUPER = Decision(True, SUPER_USER)
_DEFAULT = Decision(False, DEFAULT_DENY)
Decide = Callable[[str, str, ResourceType, str, Operation], Decision]


class _Version:
    """One policy version and its decision cache."""

    __slots__ = ("decide", "number", "policy", "super_users")

    def __init__(
        self, number: int, policy: CompiledPolicy, super_users: frozenset[str], cache_size: int
    ) -> None:
        self.number = number
        self.policy = policy
        self.super_users = super_users
        self.decide: Decide = functools.lru_cache(maxsize=cache_size)(self.decide_uncached)

    def decide_uncached(
        self, principal: str, host: str, resource_type: ResourceType, name: str, op: Operation
    ) -> Decision:
        if principal in self.super_users:
            return _SUPER
        allowed, rule = self.policy.enforce(principal, host, resource_type, name, op)
        if rule is None:
            if allowed:  # the deny-first effector always names its rule: fail closed
                log.error("casbin allowed without a rule", extra={"event": "authz_internal"})
                return Decision(False, "internal error: allowed without a deciding rule (denied)")
            return _DEFAULT
        if allowed != (rule.permission is Permission.ALLOW):
            log.error("casbin answer contradicts its rule", extra={"event": "authz_internal"})
            return Decision(False, f"internal error: answer contradicts {rule} (denied)")
        return Decision(allowed, str(rule), rule)


class Authorizer:
    """Decisions for the gateway; ``store`` is the policy it decides from."""

    def __init__(
        self,
        store: PolicyStore,
        *,
        super_users: Iterable[str] = (),
        cache_size: int = 100_000,
        reload_interval_s: float = 0.25,
        notifier: Notifier | None = None,
    ) -> None:
        """Load the policy now; ``PolicyError`` when it is unreadable or has errors."""
        self.store = store
        self.super_users = frozenset(super_users)
        self.cache_size = cache_size
        self.reload_interval_s = reload_interval_s
        self.notifier = notifier
        self.last_rejection: str | None = None
        self._lock = threading.RLock()
        files = store.read(fresh=True)
        policy = self._compile(files)
        self._digest = files.digest
        self._effective = _effective_key(files, policy)
        self._rejected: str | None = None
        self._state = _Version(1, policy, self.super_users, cache_size)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._fresh_pending = False
        self._outbox: list[str] = []
        self._expected: str | None = None
        store.add_hook(self._on_store_change)
        _log_loaded(self._state, store)

    @classmethod
    def from_config(cls, cfg: AuthorizationConfig) -> Authorizer:
        store = PolicyStore(
            cfg.policy_dir,
            model_file=cfg.model_file,
            policy_file=cfg.policy_file,
            super_users=cfg.super_users,
        )
        notifier = RedisNotifier(cfg.redis.url, cfg.redis.channel) if cfg.redis else None
        return cls(
            store,
            super_users=cfg.super_users,
            cache_size=cfg.cache_size,
            reload_interval_s=cfg.reload_interval_s,
            notifier=notifier,
        )

    @property
    def version(self) -> int:
        """Bumps on every change that takes effect (not on comment-only edits)."""
        return self._state.number

    @property
    def policy(self) -> CompiledPolicy:
        return self._state.policy

    def authorize(
        self,
        principal: str,
        host: str,
        resource_type: ResourceType,
        name: str,
        operation: Operation,
    ) -> Decision:
        """May ``principal`` connecting from ``host`` perform ``operation`` on the resource?"""
        return self._state.decide(principal, host, resource_type, name, operation)

    def explain(
        self,
        principal: str,
        host: str,
        resource_type: ResourceType,
        name: str,
        operation: Operation,
    ) -> Decision:
        """``authorize`` without the cache (for tools and measurements)."""
        return self._state.decide_uncached(principal, host, resource_type, name, operation)

    # -- reloading -------------------------------------------------------------

    def reload_if_changed(self, *, fresh: bool = False) -> bool:
        """Take in the files if they changed; True when a new version took effect.

        Cheap when nothing changed. ``fresh`` re-reads the files whatever their stat says.
        """
        with self._lock:
            try:
                files = self.store.read(fresh=fresh)
            except PolicyError as exc:
                self._reject(str(exc), f"unreadable:{exc}")
                return False
            if files.digest == self._digest:
                self._rejected = None
                return False
            if files.digest == self._rejected:
                return False
            try:
                policy = self._compile(files)
            except PolicyError as exc:
                self._reject(str(exc), files.digest)
                return False
            self._digest, self._rejected, self.last_rejection = files.digest, None, None
            effective = _effective_key(files, policy)
            if effective == self._effective:
                return False
            self._effective = effective
            self._state = _Version(
                self._state.number + 1, policy, self.super_users, self.cache_size
            )
            _log_loaded(self._state, self.store)
            return True

    def _compile(self, files: PolicyFiles) -> CompiledPolicy:
        problems = errors(lint(files.policy, warnings=False))
        if problems:
            raise PolicyError(f"{self.store.policy_path} has errors", problems)
        try:
            return CompiledPolicy(
                files.model_text,
                (rule for _, rule in files.policy.rules),
                (member for _, member in files.policy.members),
            )
        except ModelError as exc:
            raise PolicyError(f"{self.store.model_path}: {exc}") from None

    def _reject(self, reason: str, key: str) -> None:
        if key == self._rejected:
            return
        self._rejected = key
        self.last_rejection = reason
        log.error(
            "policy rejected; version %d stays in force: %s",
            self.version,
            reason,
            extra={
                "event": "policy_rejected",
                "path": str(self.store.policy_path),
                "reason": reason,
            },
        )

    def _on_store_change(self, change: PolicyChange) -> None:
        """This process changed the policy: take it in now and tell the other instances."""
        self.reload_if_changed(fresh=True)
        if self.notifier is not None:
            self._outbox.append(self._digest)
            self._poke()

    def _on_notice(self, digest: str | None) -> None:
        """Another instance changed the policy (``None``: we may have missed some)."""
        self._fresh_pending = True
        self._expected = digest
        self._poke()

    def _poke(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            loop.call_soon_threadsafe(wake.set)

    async def watch(self, stop_event: asyncio.Event) -> None:
        """Reload when the files change (stat'ed every ``reload_interval_s`` on a thread of
        their own: ``FilePoller``), at once on a notice, and every ``RECHECK_S`` whatever
        the poller saw, until ``stop_event``."""
        self._loop = asyncio.get_running_loop()
        self._wake = wake = asyncio.Event()
        poller = FilePoller((self.store.model_path, self.store.policy_path), self.reload_interval_s)
        poller.start()
        notifier_task: asyncio.Task[None] | None = None
        if self.notifier is not None:
            notifier_task = asyncio.create_task(
                self.notifier.run(self._on_notice), name="authz-policy-notices"
            )
        stop_task = asyncio.create_task(stop_event.wait(), name="authz-policy-stop")
        try:
            while not stop_event.is_set():
                fresh, self._fresh_pending = self._fresh_pending, False
                try:
                    await asyncio.to_thread(self.reload_if_changed, fresh=fresh)
                except Exception:  # a bug must not stop policy reloads for good
                    log.exception("policy reload failed", extra={"event": "policy_reload_failed"})
                self._check_expected()
                await self._publish()
                wake_task = asyncio.create_task(wake.wait(), name="authz-policy-wake")
                poll_task = asyncio.create_task(poller.wait(RECHECK_S), name="authz-policy-poll")
                await asyncio.wait(
                    {stop_task, wake_task, poll_task}, return_when=asyncio.FIRST_COMPLETED
                )
                wake_task.cancel()
                poll_task.cancel()
                wake.clear()
        finally:
            poller.close()
            for task in (stop_task, notifier_task):
                if task is not None:
                    task.cancel()
            await asyncio.gather(
                *(t for t in (stop_task, notifier_task) if t is not None), return_exceptions=True
            )
            self._loop = self._wake = None

    def _check_expected(self) -> None:
        expected, self._expected = self._expected, None
        if expected is not None and expected != self._digest and expected != self._rejected:
            log.warning(
                "another instance announced a policy this instance does not see",
                extra={
                    "event": "policy_out_of_sync",
                    "path": str(self.store.policy_path),
                    "reason": "the policy files differ (not on shared storage, or changed again)",
                },
            )

    async def _publish(self) -> None:
        if self.notifier is None or not self._outbox:
            return
        digest = self._outbox[-1]
        self._outbox.clear()
        await self.notifier.publish(digest)


def _effective_key(files: PolicyFiles, policy: CompiledPolicy) -> tuple[object, ...]:
    return (files.model_text, tuple(map(tuple, policy.rows)), tuple(policy.members))


def _log_loaded(state: _Version, store: PolicyStore) -> None:
    log.info(
        "policy version %d in force: %d rules, %d role memberships",
        state.number,
        len(state.policy.rules),
        len(state.policy.members),
        extra={
            "event": "policy_loaded",
            "path": str(store.policy_path),
            "count": len(state.policy.rules),
        },
    )
