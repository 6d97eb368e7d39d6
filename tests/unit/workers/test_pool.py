"""The supervisor's decisions (``gateway.workers.pool``), event by event, no processes."""

from __future__ import annotations

import signal

import pytest

from gateway.workers.pool import Exit, RestartPolicy, Signal, Spawn, WorkerPool

POLICY = RestartPolicy(base_s=0.5, max_s=4.0, stable_s=10.0)


def running(size: int = 2) -> WorkerPool:
    pool = WorkerPool(size, POLICY, drain_timeout_s=5.0)
    assert pool.start() == [Spawn(i) for i in range(size)]
    for index in range(size):
        pool.spawned(index, 100 + index, 0.0)
        pool.ready(index, 100 + index)
    return pool


def test_a_pool_needs_a_worker() -> None:
    with pytest.raises(ValueError):
        WorkerPool(0)


def test_backoff_doubles_up_to_the_cap() -> None:
    assert [POLICY.delay(n) for n in range(6)] == [0.0, 0.5, 1.0, 2.0, 4.0, 4.0]


def test_a_stable_worker_that_dies_is_restarted_at_once() -> None:
    pool = running()
    assert pool.exited(100, -9, now=60.0) == [Spawn(0)]
    assert pool.slots[0].restarts == 1 and pool.restarts() == 1
    assert not pool.all_ready()
    pool.spawned(0, 200, 60.1)
    pool.ready(0, 200)
    assert pool.all_ready()


def test_a_worker_that_keeps_dying_waits_longer_each_time() -> None:
    pool = running()
    now = 60.0
    waits = []
    pid = 100
    for _ in range(5):
        commands = pool.exited(pid, 1, now)
        if commands == [Spawn(0)]:
            waits.append(0.0)
        else:
            assert commands == []
            due = pool.slots[0].restart_at
            assert due is not None
            assert pool.tick(due - 0.01) == []
            assert pool.tick(due) == [Spawn(0)]
            waits.append(round(due - now, 3))
            now = due
        pid += 1
        pool.spawned(0, pid, now)  # dies again before it is ready
        now += 1.0
    assert waits == [0.0, 0.5, 1.0, 2.0, 4.0]  # the first death came after a stable run


def test_a_readiness_report_from_an_old_pid_is_ignored() -> None:
    pool = running()
    pool.exited(100, -9, 60.0)
    pool.spawned(0, 200, 60.0)
    pool.ready(0, 100)
    assert not pool.slots[0].ready


def test_a_start_failure_before_any_worker_was_ready_stops_the_pool_with_its_code() -> None:
    pool = WorkerPool(2, POLICY)
    pool.start()
    pool.spawned(0, 100, 0.0)
    pool.spawned(1, 101, 0.0)
    assert pool.exited(100, 2, 0.5) == [Signal(101, signal.SIGTERM)]
    assert pool.state == "failed"
    assert pool.exited(101, 0, 0.6) == [Exit(2)]
    assert pool.state == "done"


def test_a_start_failure_after_the_pool_was_ready_is_retried() -> None:
    pool = running()
    assert pool.exited(100, 1, 60.0) == [Spawn(0)]  # ran stably: at once
    pool.spawned(0, 200, 60.0)
    assert pool.exited(200, 1, 60.5) == []  # quick death: backoff, the pool stays up
    assert pool.state == "running"


def test_sighup_reaches_every_live_worker() -> None:
    pool = running(3)
    pool.exited(101, -9, 60.0)
    assert pool.reload() == [Signal(100, signal.SIGHUP), Signal(102, signal.SIGHUP)]


def test_sigterm_drains_every_worker_and_exits_zero_when_all_are_gone() -> None:
    pool = running()
    assert pool.stop(1.0) == [Signal(100, signal.SIGTERM), Signal(101, signal.SIGTERM)]
    assert pool.stop(1.5) == []  # a second SIGTERM changes nothing
    assert pool.reload() == []
    assert pool.exited(100, 0, 2.0) == []  # not restarted while draining
    assert pool.tick(3.0) == []
    assert pool.exited(101, 0, 3.5) == [Exit(0)]


def test_sigterm_cancels_pending_restarts() -> None:
    pool = running()
    pool.exited(100, 1, 1.0)  # quick death: a restart is pending
    assert pool.slots[0].restart_at is not None
    assert pool.stop(1.2) == [Signal(101, signal.SIGTERM)]
    assert pool.tick(100.0) == [Signal(101, signal.SIGKILL)]  # past the deadline
    assert pool.exited(101, -9, 100.1) == [Exit(1)]


def test_a_worker_still_draining_after_the_deadline_is_killed() -> None:
    pool = running()
    pool.stop(0.0)
    pool.exited(100, 0, 1.0)
    deadline = 5.0 + 15.0
    assert pool.tick(deadline - 0.1) == []
    assert pool.tick(deadline) == [Signal(101, signal.SIGKILL)]
    assert pool.tick(deadline + 1) == []  # killed once
    assert pool.exited(101, -9, deadline + 1) == [Exit(1)]


def test_an_unknown_pid_is_ignored() -> None:
    pool = running()
    assert pool.exited(999, 0, 1.0) == []
    assert pool.state == "running"
