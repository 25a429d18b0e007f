"""The package is laid out by layer, and the layers hold: a module imports from its own layer or a lower one,
never an upper one; no two modules import each other, however indirectly; and a module imports another
package's public names only (none that start with an underscore).

    core < facts < model < render, schemas < rules < live < validate, diff < generate < cli
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import eks_gpu_gitops

PACKAGE = Path(eks_gpu_gitops.__file__).resolve().parent
LAYERS = {
    "core": 0,
    "facts": 1,
    "model": 2,
    "render": 3,
    "schemas": 3,
    "rules": 4,
    "live": 5,
    "validate": 6,
    "diff": 6,
    "generate": 7,
    "cli": 8,
}


def module_name(path: Path, package: Path) -> tuple[str, ...]:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def imports(path: Path, found: dict[tuple[str, ...], Path]) -> list[tuple[tuple[str, ...], str]]:
    """(imported module, name) for every import of the package in a module, function-level ones too; a name
    that is a module of the package counts as that module."""
    here = next(name for name, p in found.items() if p == path)
    package = here if path.name == "__init__.py" else here[:-1]
    top = here[0]
    result = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = (*base, *(node.module.split(".") if node.module else ()))
            elif (node.module or "").split(".")[0] == top:
                target = tuple(node.module.split("."))
            else:
                continue
            for alias in node.names:
                submodule = (*target, alias.name)
                result.append((submodule, "") if submodule in found else (target, alias.name))
        elif isinstance(node, ast.Import):
            result += [(tuple(a.name.split(".")), "") for a in node.names if a.name.split(".")[0] == top]
    return result


def modules(package: Path) -> dict[tuple[str, ...], Path]:
    return {module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def layer(name: tuple[str, ...]) -> str | None:
    return name[1] if len(name) > 1 and name[1] in LAYERS else None


def upward_imports(found: dict[tuple[str, ...], Path]) -> list[str]:
    """Every import of a module from a layer above its own."""
    wrong = []
    for name, path in found.items():
        for target, _ in imports(path, found):
            mine, theirs = layer(name), layer(target)
            if mine and theirs and theirs != mine and LAYERS[theirs] >= LAYERS[mine]:
                wrong.append(f"{'.'.join(name)} ({mine}) imports {'.'.join(target)} ({theirs})")
    return wrong


def private_imports(found: dict[tuple[str, ...], Path]) -> list[str]:
    """Every import of a private name (or module) of another layer."""
    wrong = []
    for name, path in found.items():
        for target, imported in imports(path, found):
            if layer(target) == layer(name) or imported.startswith("__"):
                continue
            if imported.startswith("_") or target[-1].startswith("_"):
                wrong.append(f"{'.'.join(name)} imports {'.'.join(target)} {imported}".strip())
    return wrong


def cycles(found: dict[tuple[str, ...], Path]) -> list[list[str]]:
    """Tarjan's strongly connected components of the import graph that hold more than one module."""
    graph = {name: {t for t, _ in imports(path, found) if t in found} - {name} for name, path in found.items()}
    index, low, stack, on_stack, result = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(".".join(member))
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return result


def test_every_package_of_the_tool_is_a_layer():
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(LAYERS)


def test_no_module_imports_from_a_layer_above_its_own():
    assert upward_imports(modules(PACKAGE)) == []


def test_layers_use_each_other_through_public_names_only():
    assert private_imports(modules(PACKAGE)) == []


def test_no_import_cycle():
    assert cycles(modules(PACKAGE)) == []


def test_the_checks_fail_on_a_package_that_breaks_the_layering(tmp_path):
    """A copy of this package with an upward import, a private import across layers and a cycle added."""
    copy = tmp_path / PACKAGE.name
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "_helper"))
    (copy / "model" / "upward.py").write_text("from ..cli import conventions\n")
    (copy / "diff" / "peek.py").write_text("from ..render.flux_build import _git_files\n")
    (copy / "core" / "first.py").write_text("from . import second\n")
    (copy / "core" / "second.py").write_text("from .first import something\n")
    found = modules(copy)
    assert upward_imports(found) == [f"{copy.name}.model.upward (model) imports {copy.name}.cli.conventions (cli)"]
    assert private_imports(found) == [f"{copy.name}.diff.peek imports {copy.name}.render.flux_build _git_files"]
    assert cycles(found) == [[f"{copy.name}.core.first", f"{copy.name}.core.second"]]
