"""``kgw dev up|down|demo``: the local stack on loopback."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .. import logs


def _cmd_dev(args: argparse.Namespace) -> int:
    from ..devstack import stack

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


def register(commands: Any) -> None:
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
