"""``FilePoller``: files stat'ed on a thread, the event loop woken only on a change
(decision 0048); and the policy and tenant watchers built on it stay quiet when
nothing changes but still see an edit."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from gateway.authz.engine import Authorizer
from gateway.authz.store import PolicyStore
from gateway.filewatch import FilePoller
from gateway.tenants.model import Tenant
from gateway.tenants.store import FileTenantBackend, Record, TenantStore
from gateway.tenants.watch import TenantWatch

from .authz.conftest import when

REPO = Path(__file__).resolve().parents[2]
INTERVAL = 0.02


def _age(path: Path, seconds: float = 60) -> None:
    """Back-date ``path`` (as if written long ago: out of the racy window)."""
    then = time.time() - seconds
    os.utime(path, (then, then))


@contextlib.contextmanager
def _poller(path: Path, text: str, old: bool = True, racy_s: float = 2.0) -> Iterator[FilePoller]:
    """A started poller of ``path`` (written with ``text``, mode 0644; back-dated when
    ``old``)."""
    path.write_text(text)
    path.chmod(0o644)
    if old:
        _age(path)
    poller = FilePoller([path], INTERVAL, racy_s=racy_s)
    poller.start()
    try:
        yield poller
    finally:
        poller.close()


async def test_an_edit_wakes_the_waiter_and_nothing_else_does(tmp_path: Path) -> None:
    watched = tmp_path / "policy.csv"
    with _poller(watched, "a\n") as poller:
        assert await poller.wait(0.3) is False  # quiet: no notice, the timeout returns
        assert poller.notices == 0
        watched.write_text("ab\n")  # another size, a new mtime
        assert await poller.wait(2.0) is True


async def test_an_edit_that_keeps_the_stat_is_still_reported_while_the_file_is_young(
    tmp_path: Path,
) -> None:
    with _poller(tmp_path / "tenants.json", "x", old=False, racy_s=5.0) as poller:
        # young: each look may hide an edit with the same signature, so each one wakes
        assert await poller.wait(1.0) is True
        assert await poller.wait(1.0) is True


async def test_a_removed_and_recreated_file_is_a_change_each_time(tmp_path: Path) -> None:
    watched = tmp_path / "model.conf"
    with _poller(watched, "m") as poller:
        watched.unlink()
        assert await poller.wait(2.0) is True
        watched.write_text("m")
        _age(watched)
        assert await poller.wait(2.0) is True
        assert await poller.wait(0.2) is False


async def test_a_chmod_is_a_change(tmp_path: Path) -> None:
    """The stores refuse a file others may read: a chmod must be looked at too."""
    watched = tmp_path / "tenants.json"
    with _poller(watched, "{}") as poller:
        watched.chmod(0o600)
        assert await poller.wait(2.0) is True
        watched.chmod(0o640)
        assert await poller.wait(2.0) is True


async def test_an_edit_between_start_and_the_first_read_is_seen(tmp_path: Path) -> None:
    """The baseline is taken in ``start``: what the caller reads after it is never
    newer than a change the poller will report."""
    watched = tmp_path / "policy.csv"
    with _poller(watched, "a") as poller:
        watched.write_text("abc")
        _age(watched, 30)  # even back-dated: the size and mtime differ from the baseline
        assert await poller.wait(2.0) is True


async def test_close_ends_the_thread(tmp_path: Path) -> None:
    with _poller(tmp_path / "f", "f") as poller:
        thread = poller._thread
        assert thread is not None and thread.is_alive()
    await asyncio.to_thread(thread.join, 2.0)
    assert not thread.is_alive()


ALLOW_A = "p, User:a, TOPIC, LITERAL, t, WRITE, *, allow"
ALLOW_B = "p, User:b, TOPIC, LITERAL, t, WRITE, *, allow"
A_WRITES = when("User:a from 10.0.0.1 WRITE TOPIC t")
B_WRITES = when("User:b from 10.0.0.1 WRITE TOPIC t")


async def _until(done: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:  # noqa: ASYNC110 (state of another task)
        await asyncio.sleep(0.02)


def _policy_dir(tmp_path: Path, lines: list[str]) -> Path:
    policies = tmp_path / "policies"
    policies.mkdir()
    shutil.copy(REPO / "policies" / "model.conf", policies / "model.conf")
    (policies / "policy.csv").write_text("\n".join(lines) + "\n")
    for name in ("model.conf", "policy.csv"):
        _age(policies / name)
    return policies


async def test_the_policy_watch_reads_nothing_while_the_files_stay_as_they_are(
    tmp_path: Path,
) -> None:
    policies = _policy_dir(tmp_path, [ALLOW_A])
    authorizer = Authorizer(PolicyStore(policies), reload_interval_s=INTERVAL)
    reads = 0
    real = authorizer.reload_if_changed

    def counted(*, fresh: bool = False) -> bool:
        nonlocal reads
        reads += 1
        return real(fresh=fresh)

    authorizer.reload_if_changed = counted  # type: ignore[method-assign]
    stop = asyncio.Event()
    task = asyncio.create_task(authorizer.watch(stop))
    try:
        await asyncio.sleep(0.5)  # ~25 intervals
        assert reads == 1  # the first look only
        version = authorizer.version
        assert not authorizer.authorize(*B_WRITES).allowed
        (policies / "policy.csv").write_text(f"{ALLOW_A}\n{ALLOW_B}\n")
        await _until(lambda: authorizer.version != version)
        assert authorizer.version == version + 1
        assert authorizer.authorize(*B_WRITES).allowed
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


async def test_the_tenant_watch_reads_the_file_only_when_it_changes(tmp_path: Path) -> None:
    """And while a tenant is blocked, its connections are still closed every interval
    (``on_blocked``) without reading the file again."""
    path = tmp_path / "tenants.json"
    backend = FileTenantBackend(path)
    store = TenantStore(backend)
    await store.put(Tenant("acme", "bronze", "acme."), actor="t", action="create")
    _age(path)
    reads = 0
    real = backend.all

    async def counted() -> dict[str, Record]:
        nonlocal reads
        reads += 1
        return await real()

    backend.all = counted  # type: ignore[method-assign]
    watch = TenantWatch(store, interval_s=INTERVAL)
    seen: list[frozenset[str]] = []
    stop = asyncio.Event()
    task = asyncio.create_task(watch.run(stop, seen.append))
    try:
        await asyncio.sleep(0.5)  # ~25 intervals
        assert reads == 1 and seen == []
        await store.put(
            Tenant("acme", "bronze", "acme.", state="suspended"), actor="t", action="suspend"
        )
        await _until(lambda: bool(seen))
        assert seen and seen[-1] == frozenset({"acme"})
        assert watch.blocked("acme")
        _age(path)  # no longer young: the poller stops reporting it
        await asyncio.sleep(0.2)  # notices already on their way are taken
        read_then, calls_then = reads, len(seen)
        await asyncio.sleep(0.5)
        assert len(seen) >= calls_then + 5  # closed again every interval
        assert reads == read_then  # without reading the file again
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
