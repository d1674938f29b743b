"""The layering rules of docs/architecture.md, checked on the source: no import cycle among gputop's
modules (module-level imports and imports inside functions alike), Textual and Rich only under
gputop/tui, no ``try: import`` around the project's own modules, pynvml only in telemetry/nvml.py."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "gputop"


def modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(path: Path, known: set[str]) -> list[tuple[str, ast.AST]]:
    """(gputop module imported, node) for every import statement in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for n in names:
            if n in known:
                found.append((n, node))
    return found


def test_no_import_cycle_among_gputop_modules():
    mods = modules()
    known = set(mods)
    graph = {m: {n for n, _ in imports_of(p, known) if n != m} for m, p in mods.items()}
    # a package's __init__ importing its own submodules is not a cycle of responsibility: drop parent edges
    for m in graph:
        graph[m] = {n for n in graph[m] if not m.startswith(n + ".")}
    state: dict[str, int] = {}
    cycles = []

    def visit(m, stack):
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n, stack)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_textual_and_rich_only_in_the_tui():
    for mod, path in modules().items():
        if mod.startswith("gputop.tui"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad = [n for n in names if n.split(".")[0] in ("textual", "rich")]
            assert not bad, f"{path.relative_to(ROOT)}:{node.lineno} imports {bad[0]}"


def test_no_guarded_import_of_the_project_itself():
    """Neither in the package nor in the workload scripts (which put their checkout on the path instead)."""
    for path in list(modules().values()) + sorted((ROOT / "workloads").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Try):
                continue
            catches_import_error = any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                or isinstance(h.type, ast.Tuple) and any(getattr(e, "id", "") in ("ImportError", "ModuleNotFoundError")
                                                          for e in h.type.elts)
                for h in node.handlers)
            if not catches_import_error:
                continue
            for inner in node.body:
                for sub in ast.walk(inner):
                    if isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("gputop"):
                        raise AssertionError(f"{path.relative_to(ROOT)}:{sub.lineno} guards an import of {sub.module}")
                    if isinstance(sub, ast.Import) and any(a.name.startswith("gputop") for a in sub.names):
                        raise AssertionError(f"{path.relative_to(ROOT)}:{sub.lineno} guards an import of gputop")


def test_pynvml_is_imported_in_one_place():
    for mod, path in modules().items():
        if mod == "gputop.telemetry.nvml":
            continue
        assert "import pynvml" not in path.read_text(), f"{path.relative_to(ROOT)} imports pynvml"
