"""How many workers to run, and each worker's view of the configuration (no I/O).

``decide`` turns ``--workers`` / ``server.workers`` / the core count into a number
of workers, refusing (or, when the number only came from the default, falling back
to one worker with a warning) when the configuration keeps state per process that
N workers would multiply. ``worker_config`` is the configuration one worker runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import GatewayConfig
from ..sasl.settings import shared_failures_url

MAX_EXPECTED_INSTANCES = 1000


@dataclass(frozen=True, slots=True)
class Decision:
    workers: int
    warnings: tuple[str, ...] = ()
    error: str | None = None


def per_process_state(config: GatewayConfig) -> list[str]:
    """What this configuration keeps in one process only (N workers would multiply it)."""
    found = []
    if config.quotas is not None and config.quotas.redis_url is None:
        found.append(
            "quotas without quotas.redis_url are counted per process: each worker would "
            "admit the full quota (and max_connections) on its own"
        )
    return found


def per_process_limits(config: GatewayConfig, workers: int) -> list[str]:
    """Limits counted per process, as they are per instance today: said at start-up."""
    found = []
    if config.quotas is not None:
        found.append(
            f"connection limits (max_connections, connection_rate) are counted per worker, "
            f"as per instance: a tenant or address may hold up to {workers} x the limit on "
            "this host (divide by the workers, docs/quotas.md)"
        )
    if config.sasl is not None and shared_failures_url(config) is None:
        found.append(
            "the login failure limiter counts per worker: a client may fail up to "
            f"{workers} x sasl.failure_limiter.max_failures before every worker slows it"
        )
    return found


def decide(requested: int | None, configured: int, cores: int, config: GatewayConfig) -> Decision:
    """The number of workers: ``requested`` (``--workers``), else ``configured``; 0 = cores."""
    wanted = requested if requested is not None else configured
    count = wanted if wanted > 0 else max(1, cores)
    problems = per_process_state(config) if count > 1 else []
    if not problems:
        notes = per_process_limits(config, count) if count > 1 else []
        return Decision(count, warnings=tuple(notes))
    if wanted > 0:  # the operator asked for N explicitly: refuse rather than multiply
        return Decision(
            count,
            error=f"{count} workers refused: {'; '.join(problems)} "
            "(configure the shared store, or set server.workers: 1)",
        )
    return Decision(
        1,
        warnings=(
            f"server.workers defaults to the {count} cores, but {'; '.join(problems)}: "
            "running ONE worker (configure the shared store, or set server.workers to "
            "silence this)",
        ),
    )


def worker_access_log(path: Path, slot: int) -> Path:
    """Each worker rotates its own file: ``access.log`` → ``access.w<slot>.log``."""
    return path.with_name(f"{path.stem}.w{slot}{path.suffix}")


def worker_config(config: GatewayConfig, slot: int, workers: int) -> GatewayConfig:
    """The configuration worker ``slot`` of ``workers`` runs.

    - ``server.workers`` is the resolved count (never 0);
    - the metrics endpoint of a worker is private (loopback, any free port): the
      supervisor serves the configured port and aggregates every worker's figures;
    - with more than one worker, each writes its own access-log files (rotation by
      several processes on one file would lose records);
    - ``quotas.expected_instances`` counts processes: it is multiplied by the workers;
    - service monitoring (health, lag, the canary) runs in worker 0 only: one canary
      per host, not one per worker.
    """
    update: dict[str, object] = {
        "server": config.server.model_copy(update={"workers": workers}),
    }
    metrics = config.metrics
    if metrics is not None and metrics.enabled and workers > 1:
        update["metrics"] = metrics.model_copy(update={"bind_host": "127.0.0.1", "port": 0})
    accesslog = config.accesslog
    if accesslog is not None and accesslog.path is not None and workers > 1:
        path = worker_access_log(accesslog.path, slot)
        update["accesslog"] = accesslog.model_copy(update={"path": path})
    quotas = config.quotas
    if quotas is not None and workers > 1:
        instances = min(MAX_EXPECTED_INSTANCES, quotas.expected_instances * workers)
        update["quotas"] = quotas.model_copy(update={"expected_instances": instances})
    if slot > 0 and config.monitoring is not None:
        update["monitoring"] = None
    return config.model_copy(update=update)
