"""The data plane imports nothing from the tools around it: ``gateway.cli``,
``gateway.analytics`` (PySpark) and ``gateway.devstack`` may import the rest of the
package, never the other way round. Every import counts, including the lazy ones
inside functions and those under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "gateway"
TOOLS = ("gateway.cli", "gateway.analytics", "gateway.devstack")
ENTRY_POINTS = {"gateway.__main__"}  # ``python -m gateway`` is the CLI


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) for every import in ``tree``; for ``from X import
    y`` both ``X`` and ``X.y`` (``y`` may be a submodule)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            yield node.lineno, source
            for alias in node.names:
                yield node.lineno, f"{source}.{alias.name}"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    found = []
    for line, target in imported(ast.parse(source), module, is_package):
        if any(target == tool or target.startswith(f"{tool}.") for tool in TOOLS):
            found.append(f"{module}:{line} imports {target}")
    return sorted(set(found))


def data_plane() -> list[Path]:
    paths = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        if name in ENTRY_POINTS or any(name == t or name.startswith(f"{t}.") for t in TOOLS):
            continue
        paths.append(path)
    return paths


def test_the_data_plane_imports_no_tool() -> None:
    paths = data_plane()
    assert len(paths) > 50 and PACKAGE / "session.py" in paths
    found = [
        v
        for path in paths
        for v in violations(path.read_text(), module_name(path), path.name == "__init__.py")
    ]
    assert not found, "the data plane imports cli/analytics/devstack:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("source", "module", "is_package"),
    [
        ("from .cli import main", "gateway.session", False),
        ("def f():\n    from ..analytics.job import run", "gateway.runtime.client", False),
        ("from .. import devstack", "gateway.quotas.engine", False),
        ("from . import devstack", "gateway", True),
        ("import gateway.cli.certs", "gateway.tls.ca", False),
        ("import importlib\nimportlib.import_module('gateway.analytics')", "gateway.x", False),
    ],
)
def test_a_violation_is_named(source: str, module: str, is_package: bool) -> None:
    assert violations(source, module, is_package)


def test_the_rest_of_the_package_is_allowed() -> None:
    source = "from ..quotas import QuotaEngine\nfrom .client import cli_like\nimport gateway.config"
    assert violations(source, "gateway.runtime.gateway") == []
