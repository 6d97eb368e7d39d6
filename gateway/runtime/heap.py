"""What the gateway built to serve, kept out of the cyclic garbage collector's way.

CPython's cyclic collector runs a full collection whenever the objects promoted to its
oldest generation since the last one reach a quarter of that generation. Each one walks
every container object the process holds: the modules, the configuration, and with
authorization the compiled policy (10,000 rules make ~65,000 objects). Requests keep
promoting objects (an access-log batch waits 50 ms, in-flight exchanges), so a busy
gateway walks all of that every few seconds: ~2 µs per request on average in
``bench.hotpath``'s full-stack session, and a pause of tens of ms each time (decision
0057).

``settle`` collects once and then freezes what is left (``gc.freeze``): collections no
longer walk it; reference counting still frees any of it that is dropped. What a frozen
object holds in a reference cycle is not collected once dropped, so ``heap_loop``
settles again (unfreeze, collect, freeze) after the policy, the one large structure that
is replaced at run time, changed: a replaced policy's cycles are collected then.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .gateway import Gateway

log = logging.getLogger("kgw.server")
CHECK_S = 30.0  # how often the loop looks for a new policy version


def settle(reason: str) -> int:
    """Collect everything, then freeze what is left; the number of objects frozen."""
    started = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    seconds = time.perf_counter() - started
    log.info(
        "heap settled: %d objects kept out of garbage collection (%.0f ms)",
        frozen,
        seconds * 1000,
        extra={"event": "heap_settled", "reason": reason, "count": frozen, "seconds": seconds},
    )
    return frozen


async def heap_loop(gateway: Gateway, check_s: float = CHECK_S) -> None:
    """Settle once the gateway has started, and again after each policy change."""
    settled: int | None = None
    while not gateway.stopping:
        version = gateway.policy.version if gateway.policy is not None else 0
        if version != settled:
            settle("start" if settled is None else "policy")
            settled = version
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(gateway.supervisor.stop.wait(), check_s)
