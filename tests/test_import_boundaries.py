"""Import boundaries of the package, read from the source with ``ast`` (nothing is imported):
the filter and the GNN share code only through neutral modules, and stage code never imports
the command-line glue."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "trkx"


def module_name(path: Path) -> str:
    """``trkx.gnn.metrics`` for trkx/gnn/metrics.py, ``trkx.gnn`` for trkx/gnn/__init__.py."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(path: Path) -> set[str]:
    """The trkx modules ``path`` imports anywhere (also inside functions): for
    ``from A import B`` the module ``A.B`` when it is one, else ``A``; relative imports are
    resolved against the file's package."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] \
                if node.level else []
            origin = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                child = f"{origin}.{alias.name}"
                found.add(child if child in MODULES else origin)
    return {module for module in found if module == "trkx" or module.startswith("trkx.")}


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def offending(source_package: str, forbidden: str) -> list[str]:
    return [f"{name} imports {target}" for name, path in MODULES.items()
            if within(name, source_package)
            for target in sorted(imported_modules(path)) if within(target, forbidden)]


def test_the_resolver_sees_relative_and_lazy_imports() -> None:
    factory = imported_modules(MODULES["trkx.gnn.distributed.factory"])
    assert "trkx.gnn.distributed.partition" in factory          # from .partition import ...
    assert "trkx.data.events" in imported_modules(MODULES["trkx.filter.cli"])   # in a function


def test_filter_and_gnn_do_not_import_each_other() -> None:
    assert offending("trkx.filter", "trkx.gnn") == []
    assert offending("trkx.gnn", "trkx.filter") == []


def is_cli(module: str) -> bool:
    """The command-line glue: trkx.cli, trkx.stages.tools, the stages' cli modules."""
    return (within(module, "trkx.cli") or module in ("trkx.__main__", "trkx.stages.tools")
            or module.endswith(".cli"))


def test_stage_code_does_not_import_the_command_line_glue() -> None:
    assert [f"{name} imports {target}" for name, path in MODULES.items() if not is_cli(name)
            for target in sorted(imported_modules(path)) if is_cli(target)] == []


def import_graph(package: str) -> dict[str, list[str]]:
    """For each module of ``package``, the other modules of ``package`` it imports."""
    return {name: sorted(t for t in imported_modules(path) if within(t, package) and t != name)
            for name, path in MODULES.items() if within(name, package)}


def cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The cycles of ``graph`` met by a depth-first walk (each as ``[a, b, ..., a]``)."""
    found: list[list[str]] = []
    done: set[str] = set()

    def visit(name: str, stack: list[str]) -> None:
        if name in stack:
            found.append([*stack[stack.index(name):], name])
            return
        if name in done:
            return
        for target in graph.get(name, []):
            visit(target, [*stack, name])
        done.add(name)

    for name in graph:
        visit(name, [])
    return found


def test_the_cycle_finder() -> None:
    assert cycles({"a": ["b"], "b": ["c"], "c": []}) == []
    assert cycles({"a": ["b"], "b": ["c"], "c": ["a"]}) == [["a", "b", "c", "a"]]


def test_no_import_cycle_in_the_distributed_gnn() -> None:
    graph = import_graph("trkx.gnn.distributed")
    assert "trkx.gnn.distributed.block_counts" in graph["trkx.gnn.distributed.partition"]
    assert cycles(graph) == []
