"""One home per workload: its analysis, document helpers, figures and tour sentence in gputop/lessons/NAME.py,
found by the workload's name; the script in workloads/ only runs and measures; gputop/analysis/ imports no
workload helper and no lesson (the rule /work/shared/tools/layers.py checks, here on the source)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from gputop import lessons
from gputop.lessons import lesson
from gputop.runner.registry import Registry, load_spec
from gputop.tui.results import lessons as tui_lessons
from gputop.tui.model import tour

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = sorted(p.stem for p in (ROOT / "workloads").glob("*.py") if not p.name.startswith("_"))
LESSON_FILES = sorted(p.stem for p in (ROOT / "gputop" / "lessons").glob("*.py")
                      if p.stem not in ("__init__", "docs", "figures", "report_lines"))


def gputop_imports(path: Path) -> list[str]:
    """Every gputop module a file imports, at its top or inside a function."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return [n for n in out if n.startswith("gputop.")]


def test_every_lesson_is_a_workload_and_the_registry_finds_it():
    assert LESSON_FILES == sorted(lessons.NAMES)  # a lesson module is one the registry knows
    assert set(LESSON_FILES) <= set(WORKLOADS)  # and each is a workload's
    reg = Registry(dirs=[ROOT / "workloads"])
    for name in WORKLOADS:
        found = lesson(name)
        if name not in LESSON_FILES:
            assert found is None
            continue
        assert found is not None and found.name == name and callable(found.analyze), name
        spec = reg.specs[name]
        assert spec.analyze is found.analyze and spec.csv_rows is found.csv_rows, name
    assert lesson("nope") is None and lesson(None) is None and lesson("docs") is None


@pytest.mark.parametrize("name", WORKLOADS)
def test_a_workload_script_does_not_import_or_define_its_analysis(name):
    path = ROOT / "workloads" / f"{name}.py"
    tree = ast.parse(path.read_text())
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not {"analyze", "csv_rows"} & (defined | imported)
    assert "noqa: F401" not in path.read_text()  # nothing re-exported for the runner to find


def test_a_script_of_its_own_keeps_its_analyze_and_csv_rows(tmp_path):
    """A workload with no lesson (GPUTOP_WORKLOADS_PATH) may bring its own analyze and csv_rows."""
    path = tmp_path / "mine.py"
    path.write_text(textwrap.dedent('''
        from gputop.workload import Param
        NAME, DESCRIPTION, PARAMS = "mine", "a workload of my own", [Param("n", "int", 1)]
        def run(p, emit): pass
        def analyze(doc): doc["verdict"] = None
        def csv_rows(doc): return [{"n": 1}]
    '''))
    spec = load_spec(path)
    assert spec.analyze is spec.module.analyze and spec.csv_rows is spec.module.csv_rows
    path.write_text(path.read_text().replace("def csv_rows(doc): return [{\"n\": 1}]\n", ""))
    assert load_spec(path).csv_rows is None


def test_analysis_imports_no_workload_helper_and_no_lesson():
    above = ("gputop.workload", "gputop.lessons", "gputop.measure", "gputop.runner",
             "gputop.session", "gputop.headless", "gputop.tui", "gputop.export", "gputop.cli")
    bad = [f"{path.name} -> {n}" for path in sorted((ROOT / "gputop" / "analysis").glob("*.py"))
           for n in gputop_imports(path) if n.startswith(above)]
    assert bad == []


def test_lessons_sit_below_the_session_and_the_frontends():
    above = ("gputop.session", "gputop.headless", "gputop.tui", "gputop.export", "gputop.cli", "gputop.runner",
             "gputop.workload")
    bad = [f"{path.name} -> {n}" for path in sorted((ROOT / "gputop" / "lessons").glob("*.py"))
           for n in gputop_imports(path) if n.startswith(above)]
    assert bad == []


def test_the_tour_sentences_are_the_lessons():
    assert tour.STOPS and all(sentence == lesson(name).tour for name, sentence in tour.STOPS)
    toured = [n for n in lessons.NAMES if lesson(n).tour]
    assert sorted(toured) == sorted(name for name, _ in tour.STOPS)  # a lesson's TOUR is a stop of the tour


def test_the_tui_views_are_found_by_workload_name():
    assert set(tui_lessons.NAMES) <= set(lessons.NAMES)
    assert all(callable(tui_lessons.view(n)) for n in tui_lessons.NAMES)
    assert tui_lessons.view("amp") is None and tui_lessons.view(None) is None  # drawn as bars


def test_each_lesson_picks_its_own_figures_and_the_text_report_finds_them_by_name():
    from gputop.lessons.figures import figures_text

    for name in lessons.NAMES:
        pick = lesson(name).figures
        assert callable(pick) and pick({"workload": name, "points": []}) == [], name  # nothing measured: none
    point = {"phase": "a", "samples_per_s": 10.0}
    assert "samples/s" in figures_text({"workload": "amp", "points": [point]})
    assert figures_text({"workload": "nope", "points": [point]}) == ""  # no lesson: no figure
