"""The architecture seen from the tree holds in the imports: each layer imports only the layers
below it, `core/` imports nothing but itself and `errors`, and `core/` has no internal cycle.
Tests share code through `tests/support/` only: no test module imports another.

Every import counts: inside functions and under `TYPE_CHECKING` too. The planted tests show
the check failing on a violation.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import trinity_cli

PACKAGE = Path(trinity_cli.__file__).parent

# What each package (and each module at the root) may import from trinity_cli besides itself,
# bottom to top: foundations (errors, paths), the pure core, the pool's spec, what is kept on
# disk, llama.cpp, tasks, providers, the coordinator, heads on disk, the run builder
# (runtime), training, the bench, the CLI. Every package and root module is listed.
FOUNDATIONS = {"errors", "paths"}
ALLOWED = {
    "errors": set(), "paths": set(), "core": {"errors"}, "pool": FOUNDATIONS,
    "store": FOUNDATIONS | {"core", "pool"}, "llama": FOUNDATIONS | {"pool"},
    "tasks": FOUNDATIONS | {"core", "store"},
    "providers": FOUNDATIONS | {"core", "pool", "store", "llama", "tasks"},
    "coordinator": FOUNDATIONS | {"core", "pool", "store", "llama"},
    "heads": FOUNDATIONS | {"core", "pool"},
    "runtime": FOUNDATIONS
    | {"core", "pool", "store", "llama", "tasks", "providers", "coordinator", "heads"},
    "train": FOUNDATIONS
    | {"core", "pool", "store", "llama", "tasks", "providers", "coordinator", "heads", "runtime"},
    "bench": FOUNDATIONS
    | {
        "core", "pool", "store", "llama", "tasks", "providers", "coordinator", "heads", "runtime",
        "train",
    },
    "cli": FOUNDATIONS
    | {
        "core", "pool", "store", "llama", "tasks", "providers", "coordinator", "heads", "runtime",
        "train", "bench",
    },
    "__init__": set(), "__main__": {"cli"},
}


def imports_of(path: Path, package: Path) -> set[str]:
    """The trinity_cli modules `path` imports, as dotted names below trinity_cli."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = path.relative_to(package).with_suffix("").parts
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = list(here[: len(here) - node.level])
                module = ".".join(["trinity_cli", *base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith("trinity_cli."):
                dotted = name.removeprefix("trinity_cli.")
                if (package / Path(*dotted.split("."))).with_suffix(".py").is_file() or (
                    package / Path(*dotted.split("."))
                ).is_dir():
                    found.add(dotted)
    return found


def violations(package: Path) -> list[str]:
    problems = []
    graph: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(package).with_suffix("").parts)
        layer = module.split(".")[0]
        targets = imports_of(path, package)
        graph[module] = targets
        if layer not in ALLOWED:
            problems.append(f"{module} is in no layer: add it to ALLOWED")
            continue
        for target in sorted(targets):
            top = target.split(".")[0]
            if top != layer and top not in ALLOWED[layer]:
                problems.append(f"{module} imports {target}")
    problems += [f"cycle in core: {' -> '.join(c)}" for c in core_cycles(graph)]
    return problems


def core_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    core = {
        m: {t for t in targets if t.startswith("core.") and t in graph}
        for m, targets in graph.items()
        if m.startswith("core.")
    }
    cycles, done = [], set()

    def visit(module: str, trail: list[str]) -> None:
        if module in trail:
            cycles.append(trail[trail.index(module) :] + [module])
            return
        if module in done:
            return
        for target in sorted(core.get(module, ())):
            visit(target, trail + [module])
        done.add(module)

    for module in sorted(core):
        visit(module, [])
    return cycles


def test_the_package_keeps_its_layers():
    assert violations(PACKAGE) == []


def test_core_owns_the_interfaces():
    from trinity_cli.core import coordinator, provider

    for name in ("Provider", "Request", "Reply", "Prices"):
        assert hasattr(provider, name)
    assert hasattr(coordinator, "Coordinator")


def planted(tmp_path: Path, module: str, line: str) -> Path:
    copy = tmp_path / "trinity_cli"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text() + "\n" + line + "\n")
    return copy


def test_a_planted_import_under_type_checking_is_caught(tmp_path):
    copy = planted(
        tmp_path, "core/events.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from trinity_cli.providers.base import is_loopback",
    )
    assert violations(copy) == ["core.events imports providers.base"]


def test_a_planted_import_inside_a_function_is_caught(tmp_path):
    copy = planted(tmp_path, "core/head.py", "def f():\n    from trinity_cli.cli import solve")
    assert "core.head imports cli.solve" in violations(copy)


def test_a_planted_cycle_in_core_is_caught(tmp_path):
    copy = planted(tmp_path, "core/records.py", "from trinity_cli.core import episode")
    assert any(
        p.startswith("cycle in core:") and "core.episode" in p and "core.records" in p
        for p in violations(copy)
    )


TESTS = Path(__file__).resolve().parent


def imports_of_test_modules(tests: Path) -> list[str]:
    """`file imports test_x` for every import of a test module by any file under `tests`."""
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [
                f"{path.relative_to(tests)} imports {name}"
                for name in names
                if name.split(".")[-1].startswith("test_")
            ]
    return found


def test_no_test_module_imports_another():
    assert imports_of_test_modules(TESTS) == []


def test_a_planted_import_of_a_test_module_is_caught(tmp_path):
    (tmp_path / "support").mkdir()
    (tmp_path / "test_a.py").write_text("def f():\n    from test_b import helper\n")
    (tmp_path / "support" / "x.py").write_text("import support.test_c as c\n")
    assert imports_of_test_modules(tmp_path) == [
        "support/x.py imports support.test_c", "test_a.py imports test_b",
    ]


def test_a_planted_module_outside_every_layer_is_caught(tmp_path):
    copy = planted(tmp_path, "errors.py", "")
    (copy / "helpers.py").write_text("X = 1\n")
    assert violations(copy) == ["helpers is in no layer: add it to ALLOWED"]


def test_the_root_keeps_at_most_four_modules():
    """Foundations and the run builder; every other concern is a package."""
    root = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(root) <= 4, root


CLI_FILE_LINES = 150  # a command parses flags, calls the library and reports; no more fits


def test_every_cli_file_stays_thin():
    long = {
        path.name: n
        for path in sorted((PACKAGE / "cli").glob("*.py"))
        if (n := len(path.read_text().splitlines())) > CLI_FILE_LINES
    }
    assert long == {}
