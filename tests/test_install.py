"""What a fresh `pip install .` needs: every import of the package is a declared dependency.

The machine's own Python has packages a user's laptop lacks (that is how an undeclared `click`
import once shipped), so imports are checked against `pyproject.toml`, not against what
happens to be installed: each top-level module imported anywhere in a tree must be the standard
library, the tree itself, or a module of a declared distribution.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def distribution_names(requirements: list[str]) -> set[str]:
    return {
        re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements
    }


def top_level_imports(tree: Path) -> dict[str, str]:
    """Top-level module → the first file that imports it (relative imports excluded)."""
    found: dict[str, str] = {}
    for path in sorted(tree.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(tree.parent)))
    return found


def undeclared_imports(tree: Path, declared: set[str], local: set[str]) -> dict[str, str]:
    """Imports in `tree` that neither the standard library, `local` modules nor a declared
    distribution provide: module → the file that imports it."""
    providers = importlib.metadata.packages_distributions()
    undeclared = {}
    for module, where in top_level_imports(tree).items():
        if module in sys.stdlib_module_names or module in local or module == "__future__":
            continue
        # a module not installed here (tomli under Python 3.11) counts by its own name
        dists = {d.lower().replace("_", "-") for d in providers.get(module, [module])}
        if not dists & declared:
            undeclared[module] = where
    return undeclared


# Imported lazily, only by the feature its extra installs (`train` draws its curve with
# matplotlib when `[plot]` is installed): an extra's package anywhere else would break
# `pip install .`.
OPTIONAL = {"matplotlib": "plot", "ray": "ray"}


def test_the_package_imports_only_declared_dependencies():
    declared = distribution_names(PROJECT["dependencies"])
    for module, extra in OPTIONAL.items():
        assert module in distribution_names(PROJECT["optional-dependencies"][extra])
    assert undeclared_imports(ROOT / "trinity_cli", declared, {"trinity_cli", *OPTIONAL}) == {}


def test_the_tests_import_only_declared_dependencies():
    declared = distribution_names(
        PROJECT["dependencies"] + PROJECT["optional-dependencies"]["test"]
    )
    local = {p.stem for p in (ROOT / "tests").glob("*.py")} | {"support", "trinity_cli", "solution"}
    assert undeclared_imports(ROOT / "tests", declared, local) == {}


def test_a_planted_undeclared_import_is_found(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "ok.py").write_text("import json\nimport typer\nfrom rich.console import Console\n")
    (package / "bad.py").write_text("def f():\n    import click\n    from yaml import safe_load\n")
    (package / "test_only.py").write_text("import gguf\n")  # declared, but only in the test extra
    declared = distribution_names(PROJECT["dependencies"])
    assert undeclared_imports(package, declared, {"pkg"}) == {
        "click": "pkg/bad.py", "yaml": "pkg/bad.py", "gguf": "pkg/test_only.py",
    }
