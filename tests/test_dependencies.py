"""What ``pip install .`` brings: numpy is a dependency of gputop itself (not only of the test extra), and
every third-party module a workload imports at its top is one of gputop's declared dependencies, so a
plain install lists and loads every workload."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python 3.11+

# import name -> distribution name, where they differ
DISTRIBUTION = {"nvml": "nvidia-ml-py", "pynvml": "nvidia-ml-py"}


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def dist_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[;\s]", r, maxsplit=1)[0].strip().lower() for r in requirements}


def test_numpy_is_installed_with_gputop():
    deps = dist_names(project()["dependencies"])
    assert "numpy" in deps
    assert "numpy" not in dist_names(project()["optional-dependencies"]["test"])  # declared once


def top_level_imports(path: Path) -> set[str]:
    """Top-level names imported by the module's own top-level statements (``try`` blocks included),
    not by its functions."""
    names: set[str] = set()
    stack = list(ast.parse(path.read_text()).body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            names.update(a.name.partition(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
        elif isinstance(node, (ast.Try, ast.If)):
            stack += node.body + node.orelse + [s for h in getattr(node, "handlers", []) for s in h.body]
    return names


@pytest.mark.parametrize("script", sorted(p for p in (ROOT / "workloads").glob("*.py") if not p.name.startswith("_")),
                         ids=lambda p: p.name)
def test_what_a_workload_imports_at_its_top_is_a_dependency(script):
    declared = dist_names(project()["dependencies"])
    third_party = {n for n in top_level_imports(script) if n not in sys.stdlib_module_names and n != "gputop"}
    assert {DISTRIBUTION.get(n, n) for n in third_party} <= declared, (
        f"{script.name} imports {sorted(third_party)} at its top; pyproject.toml declares {sorted(declared)}")


def test_the_scan_sees_a_top_level_import():
    assert "numpy" in top_level_imports(ROOT / "workloads" / "dataloader.py")
    assert "torch" not in top_level_imports(ROOT / "workloads" / "dataloader.py")  # imported inside run()


def test_the_install_hints_name_extras_that_exist():
    from gputop.workload.script import INSTALL

    extras = set(project()["optional-dependencies"])
    named = {e for hint in INSTALL.values() for e in re.findall(r"gputop\[([^\]]+)\]", hint)}
    assert named and named <= extras, (named, extras)
    for package, hint in INSTALL.items():  # the extra brings that package
        for extra in re.findall(r"gputop\[([^\]]+)\]", hint):
            assert any(d.startswith(package) for d in dist_names(project()["optional-dependencies"][extra])), (package, extra)
    assert INSTALL["numpy"] == "pip install numpy" and "numpy" in dist_names(project()["dependencies"])
