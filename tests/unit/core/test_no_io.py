"""The connection core and the request chain do no I/O: none of their modules imports
asyncio, sockets, TLS, selectors, threads or subprocesses (at the top or lazily inside
a function), nor the network layer (``gateway.runtime``). The stores and mechanisms
they consult do their I/O off the data path (the core asks the network layer to run
them: ``RunStep``, ``RunWork``)."""

from __future__ import annotations

import ast
from pathlib import Path

from ..test_layering import PACKAGE, imported, module_name

IO_MODULES = ("asyncio", "socket", "ssl", "selectors", "threading", "subprocess", "uvloop")
CORE = (
    "gateway.core.connection",
    "gateway.core.states",
    "gateway.core.events",
    "gateway.core.commands",
    "gateway.session",
    "gateway.slots",
    "gateway.protocol.negotiation",
    "gateway.sasl.stage",
    "gateway.sasl.gate",
    "gateway.filters.stage",
    "gateway.filters.chain",
    "gateway.filters.api",
    "gateway.enforcement.stage",
    "gateway.enforcement.fetch_stage",
)


def _path(module: str) -> Path | None:
    relative = Path(*module.split(".")[1:])
    for candidate in (PACKAGE / relative.with_suffix(".py"), PACKAGE / relative / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(module: str) -> set[str]:
    path = _path(module)
    if path is None:
        return set()
    tree = ast.parse(path.read_text())
    return {target for _, target in imported(tree, module, path.name == "__init__.py")}


def test_the_core_modules_import_no_io() -> None:
    found = []
    for module in CORE:
        assert _path(module) is not None, module
        for target in _imports(module):
            top = target.split(".")[0]
            if top in IO_MODULES or target.startswith("gateway.runtime"):
                found.append(f"{module} imports {target}")
    assert found == []


def test_a_core_module_importing_asyncio_would_be_caught() -> None:
    tree = ast.parse("def f():\n    import asyncio\n")
    targets = {t for _, t in imported(tree, "gateway.session", False)}
    assert "asyncio" in targets


def test_module_names_resolve() -> None:
    assert module_name(PACKAGE / "core" / "connection.py") == "gateway.core.connection"
