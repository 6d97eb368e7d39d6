"""``kgw serve`` and ``kgw check-config``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from .. import logs
from ..config import ConfigError, GatewayConfig, load_config
from ..workers.worker import WorkerRole

log = logging.getLogger("kgw")


def run_loop(main: Coroutine[Any, Any, int]) -> int:
    """Run ``main`` on uvloop when it is installed, else on asyncio's loop."""
    factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:  # uvloop is optional (not on every platform)
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


async def serve(config: GatewayConfig, role: WorkerRole | None = None) -> int:
    """One gateway process: the only one (``role`` None) or a supervisor's worker."""
    from ..audit import AuditError
    from ..authz.store import PolicyError
    from ..credentials import StoreError as CredentialStoreError
    from ..filters.api import FilterError
    from ..quotas import StoreError as QuotaStoreError
    from ..runtime.gateway import Gateway
    from ..sasl.kerberos import KerberosSetupError
    from ..tls.material import MaterialError
    from ..upstream.identity import UpstreamCredentialError

    try:
        gateway = Gateway(config, reuse_port=role is not None and config.server.workers > 1)
    except (  # a file the configuration names: exit 2, as a bad configuration
        MaterialError,
        KerberosSetupError,
        QuotaStoreError,
        CredentialStoreError,
        UpstreamCredentialError,
    ) as exc:
        log.error("cannot start: %s", exc, extra={"event": "start_failed", "reason": str(exc)})
        return 2
    except PolicyError as exc:  # a broken policy never starts a gateway that allows all
        log.error("cannot start: %s", exc, extra={"event": "start_failed", "reason": str(exc)})
        return 2
    except AuditError as exc:  # admin changes must not go unrecorded when a trail is configured
        log.error("cannot start: %s", exc, extra={"event": "start_failed", "reason": str(exc)})
        return 2
    except FilterError as exc:  # an operator's filter that cannot load (docs/filters.md)
        log.error("cannot start: %s", exc, extra={"event": "start_failed", "reason": str(exc)})
        return 2
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, gateway.request_stop)
    loop.add_signal_handler(signal.SIGHUP, gateway.reload)
    try:
        await gateway.start()
    except OSError as exc:
        log.error("cannot start: %s", exc, extra={"event": "start_failed"})
        return 1
    if role is not None:
        from ..workers.worker import announce

        server = gateway.metrics_server
        announce(role, server.port if server is not None else None)
    log.info("gateway ready", extra={"event": "ready"})
    await gateway.wait_stopped()
    await gateway.drain()
    return 0


def _load(path: str) -> GatewayConfig | None:
    try:
        return load_config(Path(path))
    except ConfigError as exc:
        print(f"kgw: configuration error: {exc}", file=sys.stderr)
        return None


def _cmd_serve(args: argparse.Namespace) -> int:
    config = _load(args.config)
    if config is None:
        return 2
    logs.configure(config.logging.level, config.logging.format)
    if args.worker_slot is not None:  # started by the supervisor (gateway/workers)
        return _run_worker(args, config)
    from ..workers.plan import decide

    decision = decide(args.workers, config.server.workers, os.cpu_count() or 1, config)
    for warning in decision.warnings:
        log.warning(warning, extra={"event": "workers_reduced"})
    if decision.error is not None:
        log.error("cannot start: %s", decision.error, extra={"event": "start_failed"})
        print(f"kgw: {decision.error}", file=sys.stderr)
        return 2
    if decision.workers == 1:  # exactly the single process of before: no supervisor
        return run_loop(serve(config))
    from ..workers.supervisor import Supervisor

    supervisor = Supervisor(Path(args.config).resolve(), config, decision.workers)
    return run_loop(supervisor.run())


def _run_worker(args: argparse.Namespace, config: GatewayConfig) -> int:
    from ..workers.plan import worker_config
    from ..workers.worker import die_with_parent, tag_logs

    die_with_parent()
    tag_logs(args.worker_slot)
    workers = args.workers if args.workers is not None else 1
    role = WorkerRole(args.worker_slot, Path(args.worker_dir))
    return run_loop(serve(worker_config(config, args.worker_slot, workers), role))


async def preflight(config: GatewayConfig) -> str | None:
    """What would stop ``serve`` from starting with ``config``, found the way it would
    find it: the gateway is built (policies, certificates, keys and CRLs, secret files,
    the credential and quota stores, Kerberos, the audit trail, filters) but listens on
    nothing and connects to nothing. None: it would start."""
    from ..audit import AuditError
    from ..authz.store import PolicyError
    from ..credentials import StoreError as CredentialStoreError
    from ..filters.api import FilterError
    from ..quotas import StoreError as QuotaStoreError
    from ..runtime.gateway import Gateway
    from ..sasl.kerberos import KerberosSetupError
    from ..tls.material import MaterialError
    from ..upstream.identity import UpstreamCredentialError

    try:
        Gateway(config)
    except (
        MaterialError,
        KerberosSetupError,
        QuotaStoreError,
        CredentialStoreError,
        UpstreamCredentialError,
        PolicyError,
        AuditError,
        FilterError,
    ) as exc:
        return str(exc)
    return None


def _cmd_check_config(args: argparse.Namespace) -> int:
    config = _load(args.config)
    if config is None:
        return 2
    if args.schema_only:  # the filters are imported and built, as serve would
        from ..filters.api import FilterError
        from ..filters.loader import build_chain

        try:
            build_chain(config.filters)
        except FilterError as exc:
            print(f"kgw: configuration error: {exc}", file=sys.stderr)
            return 2
        print(f"{args.config}: ok (schema only)")
        return 0
    problem = asyncio.run(preflight(config))
    if problem is not None:
        print(f"kgw: configuration error: {args.config}: {problem}", file=sys.stderr)
        return 2
    print(f"{args.config}: ok")
    return 0


def _worker_count(text: str) -> int:
    from ..workers.settings import MAX_WORKERS

    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= count <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"between 0 and {MAX_WORKERS}")
    return count


def register(commands: Any) -> None:
    serve_p = commands.add_parser("serve", help="run the gateway")
    serve_p.add_argument("--config", required=True, help="YAML configuration file")
    serve_p.add_argument(
        "--workers",
        type=_worker_count,
        default=None,
        help="worker processes on the same ports (default: server.workers; 0: one per core)",
    )
    serve_p.add_argument("--worker-slot", type=int, default=None, help=argparse.SUPPRESS)
    serve_p.add_argument("--worker-dir", default=None, help=argparse.SUPPRESS)
    serve_p.set_defaults(func=_cmd_serve)

    check = commands.add_parser(
        "check-config",
        help="check a configuration as serve would load it (policies, certificates, "
        "secret files, stores) and exit",
    )
    check.add_argument("--config", required=True)
    check.add_argument(
        "--schema-only",
        action="store_true",
        help="check the file and its filters alone, not the files it names "
        "(e.g. on a machine other than the gateway's)",
    )
    check.set_defaults(func=_cmd_check_config)
