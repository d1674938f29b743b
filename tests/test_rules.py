"""The classifier's rules (gputop/analysis/rules/): every rule's examples, windows of recorded traces that must fire
it and windows that must not, run through the classifier as a run or the live monitor runs it; and what holds the
rules together: the registry (a module per class), the arbitration table's order, the declared evidence, the
schemas' class enum, the vocabulary's strings."""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

import pytest

from gputop.analysis import thresholds as T
from gputop.analysis.arbitration import TABLE, Part, Row, _check
from gputop.analysis.classify import classify
from gputop.analysis.evidence import KEYS, Evidence
from gputop.analysis.peaks import compute_peaks
from gputop.analysis.rules import RULES, module_name
from gputop.analysis.verdict import Verdict
from gputop.analysis.vocabulary import CLASSES, Cls, Sub
from gputop.telemetry.trace import ReplaySource
from verdict_util import check_text_quotes_evidence, check_verdict

ROOT = Path(__file__).resolve().parents[1]
RULES_DIR = ROOT / "gputop" / "analysis" / "rules"
EXAMPLES = [(c, ex) for c, r in RULES.items() for ex in r.examples]


@functools.lru_cache(maxsize=None)
def recorded(path: str):
    """(statics, peaks, ticks, watched pid) of a recorded trace (its one watched process, if it has one)."""
    src = ReplaySource(str(ROOT / path), speed=float("inf"))
    statics = src.static()
    pids = {k for t in src.ticks for k in ((t.get("host") or {}).get("procs") or {})}
    return statics, [compute_peaks(s) for s in statics], src.ticks, next(iter(pids)) if len(pids) == 1 else None


@functools.lru_cache(maxsize=None)
def run_document(path: str) -> dict:
    """The trace's run document, as ``gputop --replay F --json`` gives it (the job's GPUs judged together)."""
    from gputop.headless.replay import replay_document

    return replay_document(str(ROOT / path))


def judged(ex):
    if ex.judged == "run":  # a job-level rule: the GPU's verdict in the run document
        gpu = next(g for g in run_document(ex.trace)["gpus"] if g["index"] == ex.gpu)
        return Verdict.from_dict(gpu["verdict"])
    statics, peaks, ticks, pid = recorded(ex.trace)
    window = [t for t in ticks if ex.t0 <= t["t"] < ex.t1]
    assert len(window) >= T.MIN_SAMPLES, f"{ex.trace} has {len(window)} ticks in [{ex.t0}, {ex.t1})"
    return classify(window, statics[ex.gpu], peaks[ex.gpu], watched_pid=pid, hints=ex.hints, gpu=ex.gpu)


def _name(item) -> str:
    c, ex = item
    return f"{c}-{'fires' if ex.fires else 'not'}-{Path(ex.trace).name.split('.')[0]}-gpu{ex.gpu}-{ex.t0:g}s"


@pytest.mark.parametrize("cls,ex", EXAMPLES, ids=[_name(x) for x in EXAMPLES])
def test_each_rule_fires_on_its_examples_and_on_no_other(cls, ex):
    v = judged(ex)
    if ex.fires:
        assert v.cls == cls, f"{ex.why}: read {v.display_name()} ({v.evidence_text})"
        assert ex.sub is None or v.subclass == ex.sub, f"{ex.why}: read {v.display_name()}"
        check_verdict(v.to_dict(), "monitor")
        check_text_quotes_evidence(v.to_dict())
    else:
        assert v.cls != cls, f"{ex.why}: read {v.display_name()} ({v.evidence_text})"


def test_each_rule_has_examples_that_fire_it_and_examples_that_must_not():
    for c, r in RULES.items():
        fires = [ex for ex in r.examples if ex.fires]
        assert [ex for ex in r.examples if not ex.fires], f"{c}: no example that must not fire it"
        assert fires or r.no_recorded_example, f"{c}: no example that fires it, and no reason why none"
        assert all(ex.why for ex in r.examples) and all((ROOT / ex.trace).exists() for ex in r.examples), c


def test_every_class_has_its_rule_module_and_every_rule_module_a_class():
    modules = {p.stem for p in RULES_DIR.glob("*.py")} - {"__init__", "base"}
    assert modules == {module_name(c) for c in Cls}
    assert list(RULES) == list(CLASSES) and all(r.cls is c for c, r in RULES.items())


def test_each_rule_module_says_what_it_holds_and_stays_small():
    for path in sorted(RULES_DIR.glob("*.py")) + [ROOT / "gputop/analysis/arbitration.py"]:
        text = path.read_text()
        assert ast.get_docstring(ast.parse(text)), path.name
        assert len(text.splitlines()) < 400, path.name


def test_the_schemas_list_every_class():
    for name in ("monitor", "run"):
        schema = json.loads((ROOT / "gputop" / "schema" / f"{name}.schema.json").read_text())
        assert schema["$defs"]["class"]["enum"] == list(CLASSES), f"{name}.schema.json's class enum"


def test_a_class_is_its_string_in_json_in_text_and_as_a_key():
    assert Cls.PCIE_BOUND == "pcie-bound" and Cls("pcie-bound") is Cls.PCIE_BOUND
    assert json.dumps({Cls.PCIE_BOUND: [Sub.KERNEL_MIX]}) == '{"pcie-bound": ["kernel mix"]}'
    assert f"{Cls.IDLE} ({Sub.STARTUP})" == str(Cls.IDLE) + " (startup)" == "idle (startup)"
    assert {"memory-bound": 1}[Cls.MEMORY_BOUND] == 1 and Cls.LATENCY_BOUND.label == "latency/launch-bound"


def test_a_verdict_refuses_an_undeclared_evidence_key():
    scores = {c: 0.0 for c in CLASSES}
    Verdict("memory-bound", evidence={"dram_bw_pct": 88.0}, scores=scores)
    with pytest.raises(KeyError, match="dram_bw_pcnt"):
        Verdict("memory-bound", evidence={"dram_bw_pcnt": 88.0}, scores=scores)  # the classifier's: declared only
    v = Verdict("stalled", evidence=Evidence(util_gpu_pct=100.0))
    with pytest.raises(KeyError, match="stalled_since"):
        v.evidence.update(stalled_since=3.0)  # the job's judgement writes declared keys only
    # a workload's own verdict (no scores) names its own numbers
    assert Verdict("compute-bound", "amp speedup", None, {"speedup": 6.1}).evidence == {"speedup": 6.1}


def test_every_declared_key_has_a_unit_and_a_meaning_and_every_window_only_declared_keys():
    assert all(k.unit and k.meaning and k.name == name for name, k in KEYS.items())
    for ex in EXAMPLES[:4]:
        v = judged(ex[1])
        assert isinstance(v.evidence, Evidence) and set(v.evidence) <= set(KEYS)


def test_the_arbitration_table_reads_nothing_a_later_row_changes():
    _check(TABLE)  # as at import
    late = Row((Cls.COMPUTE_BOUND,), Cls.PCIE_BOUND, "reads compute-bound")
    with pytest.raises(ValueError, match="later row"):
        _check((late, Row((Cls.IDLE,), Cls.COMPUTE_BOUND, "changes it after")))
    with pytest.raises(ValueError, match="later row"):
        _check((Row((Part(Cls.LATENCY_BOUND, "launch"),), Cls.IDLE, "reads a part"),
                Row((Cls.PCIE_BOUND,), Part(Cls.LATENCY_BOUND, "launch"), "changes the part after")))
    assert all(row.why for row in TABLE)
