"""The ``kgw`` command."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from . import __version__, logs
from .config import ConfigError, GatewayConfig, load_config

log = logging.getLogger("kgw")


def _run(main: Coroutine[Any, Any, int]) -> int:
    factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:  # uvloop is optional (not on every platform)
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


async def serve(config: GatewayConfig) -> int:
    from .server import Gateway

    gateway = Gateway(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, gateway.request_stop)
    try:
        await gateway.start()
    except OSError as exc:
        log.error("cannot start: %s", exc, extra={"event": "start_failed"})
        return 1
    log.info("gateway ready", extra={"event": "ready"})
    await gateway.wait_stopped()
    await gateway.drain()
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        config = load_config(Path(args.config))
    except ConfigError as exc:
        print(f"kgw: configuration error: {exc}", file=sys.stderr)
        return 2
    logs.configure(config.logging.level, config.logging.format)
    return _run(serve(config))


def _cmd_check_config(args: argparse.Namespace) -> int:
    try:
        load_config(Path(args.config))
    except ConfigError as exc:
        print(f"kgw: configuration error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.config}: ok")
    return 0


def _cmd_dev(args: argparse.Namespace) -> int:
    from .devstack import stack

    logs.configure("INFO", "text")
    directory = Path(args.dir)
    if args.dev_command == "up":
        info = stack.up(directory, nodes=args.nodes)
        bootstrap = info["gateway"]["bootstrap"]
        print(f"stack up: gateway bootstrap {bootstrap}; details in {directory / 'stack.json'}")
        return 0
    if args.dev_command == "down":
        stack.down(directory)
        print("stack down")
        return 0
    if args.dev_command == "demo":
        return stack.demo(directory)
    raise AssertionError(args.dev_command)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kgw", description="KaaS Gateway")
    parser.add_argument("--version", action="version", version=f"kgw {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve_p = commands.add_parser("serve", help="run the gateway")
    serve_p.add_argument("--config", required=True, help="YAML configuration file")
    serve_p.set_defaults(func=_cmd_serve)

    check = commands.add_parser("check-config", help="validate a configuration file and exit")
    check.add_argument("--config", required=True)
    check.set_defaults(func=_cmd_check_config)

    dev = commands.add_parser("dev", help="local stack: a 3-node Kafka cluster behind a gateway")
    dev_commands = dev.add_subparsers(dest="dev_command", required=True)
    up = dev_commands.add_parser("up", help="start the cluster and a gateway, write stack.json")
    up.add_argument("--dir", default=".stack")
    up.add_argument("--nodes", type=int, default=3)
    down = dev_commands.add_parser("down", help="stop what 'dev up' started")
    down.add_argument("--dir", default=".stack")
    demo = dev_commands.add_parser("demo", help="produce and consume through the running stack")
    demo.add_argument("--dir", default=".stack")
    dev.set_defaults(func=_cmd_dev)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
