"""The layering rules of docs/architecture.md, checked on the source: no import cycle among gputop's
modules (module-level imports and imports inside functions alike), Textual and Rich only under
gputop/tui, no ``try: import`` around the project's own modules, pynvml only in telemetry/nvml.py, and the layer
order (base < analysis < measure, runner, lessons, workload helpers < session, fleet < frontends < evaluate), every
module in a layer: evaluate (not shipped) above everything the product is made of, so no product module imports it."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "gputop"


@functools.lru_cache(maxsize=None)
def _parsed(source: str) -> ast.AST:
    return ast.parse(source)


def tree(path: Path) -> ast.AST:
    """The file's syntax tree, parsed once per content for the whole module (each check walks every file)."""
    return _parsed(path.read_text())


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
    for node in ast.walk(tree(path)):
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
        for node in ast.walk(tree(path)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad = [n for n in names if n.split(".")[0] in ("textual", "rich")]
            assert not bad, f"{path.relative_to(ROOT)}:{node.lineno} imports {bad[0]}"


def test_no_guarded_import_of_the_project_itself():
    """Neither in the package nor in the workload scripts (which put their checkout on the path instead)."""
    for path in list(modules().values()) + sorted((ROOT / "workloads").glob("*.py")):
        for node in ast.walk(tree(path)):
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


# -- the layer order (docs/architecture.md; /work/shared/tools/layers.py) ------------------------------------------
# Every top-level part of gputop has a declared layer: a module in none fails the test, so a new one gets a place.
# Lower numbers are lower layers; a module may import its own layer and those below, never above.
LAYERS = {
    # base: the package itself, its data packages, documents, exit codes, formatting, paths, telemetry
    "": 0, "data": 0, "schema": 0, "documents": 0, "exitcodes": 0, "crashlog": 0, "format": 0, "paths": 0, "telemetry": 0,
    "sources": 0,  # being moved into telemetry/
    "option_values": 0,  # the values options take (an address, a duration): parsed for cli and the frontends
    "analysis": 1,
    "measure": 2, "runner": 2, "lessons": 2, "workload": 2,  # with the workload helpers
    "session": 3, "fleet": 3,  # watching a process tree; reading a fleet from Prometheus
    "headless": 4, "tui": 4, "export": 4, "cli": 4, "__main__": 4,  # the frontends
    "evaluate": 5,  # how right gputop is (labelled traces, calibration, confusion tables): tests and bench, not shipped
}
FRONTENDS = {top for top, level in LAYERS.items() if level == 4}
NOT_SHIPPED = {"evaluate"}  # left out of the wheel (pyproject.toml's packages; tests/test_packaging.py)
MAY_IMPORT_ANY_FRONTEND = {"cli", "__main__"}
WORKLOAD_HELPERS = {"workload"}


def part_of(mod: str) -> str:
    """gputop.analysis.classify -> analysis; gputop -> '' (the package's own __init__)."""
    return mod.split(".")[1] if "." in mod else ""


def gputop_imports(mod: str, path: Path, known: set[str]) -> set[str]:
    """Every gputop module (or package) the file imports, at any depth (function-level imports count), relative
    imports resolved; ``from gputop.x import y`` counts as an import of gputop.x, ``from gputop import x`` (or
    ``from .. import x``) of gputop.x where x is a module."""
    package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    out = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join((package[:len(package) - node.level + 1] if node.level else [])
                            + ([node.module] if node.module else []))
            subs = {f"{base}.{a.name}" for a in node.names} & known
            out |= subs or {base}
    return {n for n in out if n == "gputop" or n.startswith("gputop.")}


def layer_crossings(mods: dict[str, Path]) -> list[str]:
    """``a -> b (why)`` for each import that crosses the layers the wrong way, and each module in no layer."""
    bad = set()
    for mod, path in mods.items():
        me = part_of(mod)
        if me not in LAYERS:
            bad.add(f"{mod} (in no layer: give gputop.{me} its place in LAYERS)")
            continue
        for n in gputop_imports(mod, path, set(mods)):
            them = part_of(n)
            if them not in LAYERS:
                bad.add(f"{mod} -> {n} (a module in no layer)")
            elif me == "analysis" and them in WORKLOAD_HELPERS:
                bad.add(f"{mod} -> {n} (analysis imports a workload helper)")
            elif LAYERS[them] > LAYERS[me]:
                bad.add(f"{mod} -> {n} (up: {me or 'gputop'} -> {them})")
            elif me in FRONTENDS and them in FRONTENDS and me != them and me not in MAY_IMPORT_ANY_FRONTEND:
                bad.add(f"{mod} -> {n} (frontend -> frontend)")
    return sorted(bad)


def test_the_layer_check_finds_each_kind_of_crossing(tmp_path):
    files = {
        "gputop/__init__.py": "",
        "gputop/foo.py": "",  # a new top-level module with no declared place
        "gputop/workload/__init__.py": "",
        "gputop/workload/util.py": "",
        "gputop/telemetry/__init__.py": "",
        "gputop/telemetry/live.py": "from ..analysis import classify\n",  # up, relative, from a package
        "gputop/analysis/__init__.py": "",
        "gputop/analysis/classify.py": "from gputop import session\nfrom . import peaks\n",  # up; same layer: fine
        "gputop/analysis/peaks.py": "def f():\n    import gputop.workload.util\n",  # function-level import
        "gputop/session/__init__.py": "from gputop.analysis.classify import x\nimport gputop.telemetry.live\n",
        "gputop/tui/__init__.py": "",
        "gputop/tui/app.py": "from gputop.headless import run\n",  # frontend -> frontend
        "gputop/headless/__init__.py": "",
        "gputop/headless/run.py": "from gputop.session import s\n",
        "gputop/cli.py": "import gputop.tui.app\nfrom gputop.headless import run\n",  # cli may import any frontend
        "gputop/headless/replay.py": "def f():\n    from gputop.evaluate.labelled import diagnose_trace\n",  # the top
        "gputop/evaluate/__init__.py": "",
        "gputop/evaluate/labelled.py": "from gputop.headless.replay import f\nfrom gputop.session import s\n",  # fine
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    mods = {}
    for name in files:
        parts = name[:-3].split("/")
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = tmp_path / name
    assert layer_crossings(mods) == [
        "gputop.analysis.classify -> gputop.session (up: analysis -> session)",
        "gputop.analysis.peaks -> gputop.workload.util (analysis imports a workload helper)",
        "gputop.foo (in no layer: give gputop.foo its place in LAYERS)",
        "gputop.headless.replay -> gputop.evaluate.labelled (up: headless -> evaluate)",
        "gputop.telemetry.live -> gputop.analysis.classify (up: telemetry -> analysis)",
        "gputop.tui.app -> gputop.headless.run (frontend -> frontend)",
    ]


def test_imports_follow_the_layer_order():
    crossings = layer_crossings(modules())
    assert not crossings, f"{len(crossings)} import(s) across the layers:\n" + "\n".join(crossings)


def test_evaluation_is_above_everything_shipped():
    """Nothing the wheel holds may import gputop.evaluate: its layer is above every other, and it is the only part
    of gputop that pyproject.toml leaves out."""
    import tomllib

    assert all(LAYERS[top] > level for top in NOT_SHIPPED for other, level in LAYERS.items() if other not in NOT_SHIPPED)
    shipped = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {init.parent.name for init in PKG.glob("*/__init__.py")}
    assert {p for p in packages if f"gputop.{p}" not in shipped} == NOT_SHIPPED


# -- the TUI's rooms (gputop/tui) -----------------------------------------------------------------------------------
# Inside the TUI every top-level part (a module or a package of gputop/tui; "" is the package's own __init__: main_tui)
# has a room. A part may import its own part and the rooms below, never above; another part of its own room only in
# the rooms that say so (the pages never import each other: what two pages share lives in a room below them). The
# model's room imports neither Textual nor Rich. A part in no room fails the test, so a new one gets a place.
TUI_ROOMS = [  # lowest first: (room, its parts, whether its parts may import each other)
    ("base", {"config", "messages", "screen_text", "terminal", "help", "widgets", "crash"}, True),  # what all stand on
    ("model", {"model"}, False),  # the state the pages share, the runs, the tour, the screen's plain data
    ("shared views", {"results", "header"}, False),  # a run's results (both pages), the rows above the pages
    ("pages", {"monitor", "workloads", "cluster"}, False),
    ("app", {"app", "lifecycle", "early_frame"}, True),  # composes the pages, routes the keys; how a session goes
    ("ways in", {"", "command", "serve"}, False),  # main_tui, --tui --run / --watch, --serve
]
TUI_PLAIN = {"model"}  # rooms without Textual or Rich


def tui_part(mod: str) -> str | None:
    """gputop.tui.monitor.page -> monitor; gputop.tui -> ''; None outside the TUI."""
    parts = mod.split(".")
    if parts[:2] != ["gputop", "tui"]:
        return None
    return parts[2] if len(parts) > 2 else ""


def tui_room_crossings(mods: dict[str, Path]) -> list[str]:
    """``a -> b (why)`` for each import inside the TUI that goes up a room or sideways where its room forbids it, each
    TUI module in no room, and each import of Textual or Rich in a plain room."""
    level = {part: (i, name, sideways) for i, (name, parts, sideways) in enumerate(TUI_ROOMS) for part in parts}
    bad = set()
    for mod, path in mods.items():
        me = tui_part(mod)
        if me is None:
            continue
        if me not in level:
            bad.add(f"{mod} (in no room: give gputop.tui.{me} its place in TUI_ROOMS)")
            continue
        my_level, my_room, sideways = level[me]
        if my_room in TUI_PLAIN:
            for node in ast.walk(tree(path)):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                for n in names:
                    if n.split(".")[0] in ("textual", "rich"):
                        bad.add(f"{mod} -> {n} (Textual or Rich in the {my_room} room)")
        for n in gputop_imports(mod, path, set(mods)):
            them = tui_part(n)
            if them is None or them == me or them not in level:
                continue  # outside the TUI (the layers' test), its own part, or a part the first check names
            their_level, their_room, _ = level[them]
            if their_level > my_level:
                bad.add(f"{mod} -> {n} (up: {my_room} -> {their_room})")
            elif their_level == my_level and not sideways:
                bad.add(f"{mod} -> {n} (sideways in the {my_room} room)")
    return sorted(bad)


def test_the_room_check_finds_each_kind_of_crossing(tmp_path):
    files = {
        "gputop/__init__.py": "",
        "gputop/tui/__init__.py": "def main_tui():\n    from gputop.tui.app import App\n",  # down: fine
        "gputop/tui/app.py": "from gputop.tui.monitor.page import MonitorPage\nfrom . import lifecycle\n",  # fine
        "gputop/tui/lifecycle.py": "from gputop.tui.messages import Redraw\n",
        "gputop/tui/messages.py": "from gputop.tui.terminal import x\n",  # sideways in the base: fine
        "gputop/tui/terminal.py": "",
        "gputop/tui/model/__init__.py": "from gputop.tui.model import runs\nfrom gputop.tui.results import panel\n",  # up
        "gputop/tui/model/runs.py": "from rich.text import Text\n",  # Rich in the model
        "gputop/tui/results/__init__.py": "",
        "gputop/tui/results/panel.py": "from gputop.tui.header import InfoBar\n",  # sideways: the shared views
        "gputop/tui/header.py": "",
        "gputop/tui/monitor/__init__.py": "",
        "gputop/tui/monitor/page.py": "def f():\n    from ..workloads import page\n",  # page -> page, in a function
        "gputop/tui/workloads/__init__.py": "",
        "gputop/tui/workloads/page.py": "from gputop.tui.model import TuiModel\n",  # down: fine
        "gputop/tui/kitchen.py": "",  # a new part with no room
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    mods = {}
    for name in files:
        parts = name[:-3].split("/")
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = tmp_path / name
    assert tui_room_crossings(mods) == [
        "gputop.tui.kitchen (in no room: give gputop.tui.kitchen its place in TUI_ROOMS)",
        "gputop.tui.model -> gputop.tui.results.panel (up: model -> shared views)",
        "gputop.tui.model.runs -> rich.text (Textual or Rich in the model room)",
        "gputop.tui.monitor.page -> gputop.tui.workloads.page (sideways in the pages room)",
        "gputop.tui.results.panel -> gputop.tui.header (sideways in the shared views room)",
    ]


def test_the_tuis_rooms_import_only_down():
    crossings = tui_room_crossings(modules())
    assert not crossings, f"{len(crossings)} import(s) across the TUI's rooms:\n" + "\n".join(crossings)
