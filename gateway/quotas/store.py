"""Where quota settings live: Redis (shared by every instance) or a JSON file (one instance).

Three sections: ``quotas`` (target → values), ``plans`` (name → plan) and
``tenants`` (tenant → plan name). Every change is an atomic read-modify-write of
one entry (Redis: WATCH/MULTI plus a version counter; file: an exclusive lock and
an atomic rename), names its ``actor``, and is handed to the hooks as
``hook(actor, action, target, before, after)`` for the audit trail. Hooks run in
the thread that made the change. The Redis URL may hold a password, so it never
reaches an error message or a log line.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..fileutil import exclusive_lock, write_atomically
from .model import InvalidQuotaError, QuotaSettings, Target, check_values
from .settings import PlanConfig, QuotaConfig

log = logging.getLogger("kgw.quotas")
ChangeHook = Callable[[str, str, str, object, object], None]
Change = Callable[[Any], Any]
SECTIONS = ("quotas", "plans", "tenants")
PLAN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class StoreError(Exception):
    """The store cannot be read or written right now (Redis down, file unreadable)."""


def decode_settings(
    raw: Mapping[str, Mapping[str, str]], version: str, *, source: str = "store"
) -> QuotaSettings:
    """Settings from the stored JSON texts; a malformed entry is skipped with a warning."""
    quotas: dict[Target, dict[str, float]] = {}
    plans: dict[str, PlanConfig] = {}
    tenants: dict[str, str] = {}
    for name, text in raw.get("quotas", {}).items():
        try:
            target = Target.parse(name)
            quotas[target] = check_values(target, json.loads(text))
        except (ValueError, TypeError, AttributeError) as exc:
            _skip(source, "quotas", name, exc)
    for name, text in raw.get("plans", {}).items():
        try:
            plans[name] = PlanConfig.model_validate(json.loads(text))
        except (ValueError, ValidationError) as exc:
            _skip(source, "plans", name, exc)
    for name, text in raw.get("tenants", {}).items():
        try:
            plan = json.loads(text)
        except ValueError as exc:
            _skip(source, "tenants", name, exc)
            continue
        if isinstance(plan, str):
            tenants[name] = plan
    return QuotaSettings(quotas, plans, tenants, version)


def _skip(source: str, section: str, name: str, exc: Exception) -> None:
    log.warning(
        "ignoring a malformed quota setting %s/%s: %s",
        section,
        name,
        type(exc).__name__,
        extra={"event": "quota_setting_bad", "path": source},
    )


class QuotaStore(abc.ABC):
    """The operations ``kgw quota`` and Kafka's AlterClientQuotas need; blocking I/O."""

    def __init__(self) -> None:
        self._hooks: list[ChangeHook] = []

    def add_hook(self, hook: ChangeHook) -> None:
        self._hooks.append(hook)

    def close(self) -> None:  # noqa: B027 (only the Redis store holds anything)
        """Release connections (Redis); the store must not be used afterwards."""

    @abc.abstractmethod
    def load(self) -> QuotaSettings: ...

    @abc.abstractmethod
    def version(self) -> str: ...

    @abc.abstractmethod
    def _modify(self, section: str, name: str, change: Change) -> tuple[Any, Any]:
        """Atomically replace one entry (None: absent) by ``change(old)``; (before, after)."""

    def set_values(
        self, target: Target, values: Mapping[str, float | None], actor: str
    ) -> dict[str, float] | None:
        """Set (or, for None, remove) some of a target's values; its values after."""
        removing = [k for k, v in values.items() if v is None]
        check_values(target, dict.fromkeys(removing, 1.0))  # the keys must exist
        setting = check_values(target, {k: v for k, v in values.items() if v is not None})

        def change(old: Any) -> Any:
            new = dict(old or {})
            new.update(setting)
            for key in removing:
                new.pop(key, None)
            return new or None

        _, after = self._change(actor, "quota_set", "quotas", str(target), change)
        return dict(after) if after else None

    def remove_target(self, target: Target, actor: str) -> bool:
        before, _ = self._change(actor, "quota_remove", "quotas", str(target), lambda _: None)
        return before is not None

    def set_plan(self, name: str, plan: PlanConfig | None, actor: str) -> None:
        if not PLAN_NAME.fullmatch(name):
            raise InvalidQuotaError(f"plan name {name!r}: letters, digits, '_', '.', '-' only")
        value = plan.model_dump(exclude_none=True) if plan is not None else None
        self._change(actor, "plan_set" if plan else "plan_remove", "plans", name, lambda _: value)

    def assign(self, tenant: str, plan: str | None, actor: str) -> None:
        if not tenant:
            raise InvalidQuotaError("a tenant name is required")
        action = "plan_assign" if plan else "plan_unassign"
        self._change(actor, action, "tenants", tenant, lambda _: plan)

    def _change(
        self, actor: str, action: str, section: str, name: str, change: Change
    ) -> tuple[Any, Any]:
        before, after = self._modify(section, name, change)
        if before != after:
            log.info(
                "quota settings changed by %s: %s %s",
                actor,
                action,
                name,
                extra={"event": "quota_changed", "reason": action, "subject": name},
            )
            for hook in list(self._hooks):
                try:
                    hook(actor, action, f"{section}/{name}", before, after)
                except Exception:
                    log.exception("quota change hook failed", extra={"event": "quota_hook_failed"})
        return before, after


class FileQuotaStore(QuotaStore):
    """A JSON file, for a single gateway instance (and for ``kgw quota --file``)."""

    def __init__(self, path: Path | str) -> None:
        super().__init__()
        self.path = Path(path)

    def _read(self) -> tuple[dict[str, dict[str, Any]], str]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {s: {} for s in SECTIONS}, "absent"
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot read: {exc.strerror}") from None
        try:
            doc = json.loads(data) if data.strip() else {}
        except ValueError as exc:
            raise StoreError(f"{self.path}: not valid JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise StoreError(f"{self.path}: expected a JSON object")
        sections: dict[str, dict[str, Any]] = {}
        for section in SECTIONS:
            entries = doc.get(section)
            sections[section] = entries if isinstance(entries, dict) else {}
        return sections, hashlib.sha256(data).hexdigest()

    def load(self) -> QuotaSettings:
        sections, version = self._read()
        raw = {s: {k: json.dumps(v) for k, v in sections[s].items()} for s in SECTIONS}
        return decode_settings(raw, version, source=str(self.path))

    def version(self) -> str:
        return self._read()[1]

    def _modify(self, section: str, name: str, change: Change) -> tuple[Any, Any]:
        with self._locked():
            sections, _ = self._read()
            before = sections[section].get(name)
            after = change(before)
            if after is None:
                sections[section].pop(name, None)
            else:
                sections[section][name] = after
            if before != after:
                text = json.dumps(sections, indent=2, sort_keys=True) + "\n"
                _write_atomically(self.path, text)
            return before, after

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return exclusive_lock(self.path.parent / f".{self.path.name}.lock")


class RedisQuotaStore(QuotaStore):
    """Hashes ``<prefix>quotas|plans|tenants`` and a ``<prefix>version`` counter."""

    def __init__(self, url: str, prefix: str, timeout_s: float = 2.0) -> None:
        super().__init__()
        import redis

        self.prefix = prefix
        self._client = redis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            decode_responses=True,
        )

    def key(self, section: str) -> str:
        return f"{self.prefix}{section}"

    def load(self) -> QuotaSettings:
        with _redis_errors():
            pipe = self._client.pipeline(transaction=True)
            for section in SECTIONS:
                pipe.hgetall(self.key(section))
            pipe.get(self.key("version"))
            *hashes, version = pipe.execute()
        return decode_settings(dict(zip(SECTIONS, hashes, strict=True)), str(version or "0"))

    def version(self) -> str:
        with _redis_errors():
            return str(self._client.get(self.key("version")) or "0")

    def _modify(self, section: str, name: str, change: Change) -> tuple[Any, Any]:
        key = self.key(section)
        result: list[Any] = []

        def apply(pipe: Any) -> None:
            text = pipe.hget(key, name)
            before = json.loads(text) if text is not None else None
            after = change(before)
            result[:] = [before, after]
            if before == after:
                return
            pipe.multi()
            if after is None:
                pipe.hdel(key, name)
            else:
                pipe.hset(key, name, json.dumps(after, sort_keys=True))
            pipe.incr(self.key("version"))

        with _redis_errors():
            self._client.transaction(apply, key)
        return result[0], result[1]

    def close(self) -> None:
        self._client.close()


@contextlib.contextmanager
def _redis_errors() -> Iterator[None]:
    from redis.exceptions import RedisError

    try:
        yield
    except (RedisError, OSError) as exc:
        raise StoreError(
            f"the quota store in Redis is unavailable ({type(exc).__name__})"
        ) from None


def open_store(cfg: QuotaConfig) -> QuotaStore:
    """The store the configuration names: Redis when ``redis_url`` is set, else the file."""
    if cfg.redis_url is not None:
        return RedisQuotaStore(cfg.redis_url, cfg.key_prefix, max(cfg.redis_timeout_s, 1.0))
    return FileQuotaStore(cfg.store_file)


def _write_atomically(path: Path, text: str) -> None:
    write_atomically(path, text)
