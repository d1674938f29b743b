"""A workload whose third-party import fails is listed with what it needs and how to install it, and
``gputop --run`` of it is one line on stderr and exit 4 (one JSON document with ``--json``), whether
the import is at the top of the script (the registry finds it: the script cannot start) or inside
``run()`` (the child reports it). Real errors are not mistaken for a missing dependency."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputop import exitcodes
from gputop.workload import script as workload_script
from gputop.runner.registry import MissingWorkloadDependency, Registry, UnknownWorkload

ROOT = Path(__file__).resolve().parents[1]
ABSENT = "gputop_test_absent_module"  # a module that is installed nowhere
HINT = f"install the package that provides the module '{ABSENT}'"

HEADER = """\
import sys
from pathlib import Path

try:
    import gputop  # noqa: F401
except ImportError:
    sys.path.insert(0, CHECKOUT)

from gputop.workload import Param, main
"""

TOP_IMPORT = HEADER + f"""
import {ABSENT} as absent
from {ABSENT}.sub import thing

NAME = "needs_absent"
DESCRIPTION = "imports a missing module at its top"
PARAMS = [Param("device", "choice", "cuda", choices=["cuda", "cpu"], help="where it runs")]
NEEDS = ["torch"]


@absent.jit
def kernel(x):
    return thing(x)


class Net(absent.nn.Module):
    pass


def run(p, emit):
    emit.started(NAME, p, {{"kind": p["device"]}})


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
"""

RUN_IMPORT = HEADER + f"""
NAME = "needs_absent_in_run"
DESCRIPTION = "imports a missing module inside run()"
PARAMS = [Param("device", "choice", "cuda", choices=["cuda", "cpu"], help="where it runs")]


def run(p, emit):
    emit.started(NAME, p, {{"kind": p["device"]}})
    import {ABSENT}  # noqa: F401


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
"""


@pytest.fixture
def folder(tmp_path) -> Path:
    (tmp_path / "needs_absent.py").write_text(TOP_IMPORT.replace("CHECKOUT", repr(str(ROOT))))
    (tmp_path / "needs_absent_in_run.py").write_text(RUN_IMPORT.replace("CHECKOUT", repr(str(ROOT))))
    return tmp_path


def gputop(*args, path: Path, prelude: str = ""):
    """``gputop ARGS`` in a child; ``prelude`` runs first in that process (to hide a module)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), GPUTOP_WORKLOADS_PATH=str(path))
    code = prelude + "import sys; from gputop.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=60)


def one_document(stdout: str) -> dict:
    doc, end = json.JSONDecoder().raw_decode(stdout)
    assert not stdout[end:].strip(), "more than one document on stdout"
    return doc


def lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def block(out: str, name: str) -> str:
    """The lines of ``gputop --list`` that describe workload ``name``."""
    return out.split("\n" + name + " ", 1)[1].split("\n\n", 1)[0]


# -- listed, with what it needs ------------------------------------------------------------------
def test_list_shows_a_workload_whose_top_level_import_is_missing(folder):
    r = gputop("--list", path=folder)
    assert r.returncode == exitcodes.OK and r.stderr == ""  # listed, not "skipped a workload"
    entry = block(r.stdout, "needs_absent")
    assert "imports a missing module at its top" in entry.splitlines()[0]
    assert f"needs {ABSENT}: {HINT} (not installed)" in entry
    assert "needs torch: pip install 'gputop[torch]'" in entry
    assert f"cannot run here without {ABSENT}" in entry
    assert "cannot run here" not in block(r.stdout, "needs_absent_in_run")  # found only when it runs


def test_list_json_says_what_is_missing_and_how_to_install_it(folder):
    r = gputop("--list", "--json", path=folder)
    assert r.returncode == exitcodes.OK
    by_name = {w["name"]: w for w in json.loads(r.stdout)}
    w = by_name["needs_absent"]
    assert w["needs"] == ["torch", ABSENT] and w["runnable"] is False
    assert ABSENT in w["not_installed"]
    assert w["install"] == {"torch": "pip install 'gputop[torch]'", ABSENT: HINT}
    assert by_name["needs_absent_in_run"]["runnable"] is True
    assert by_name["roofline"]["install"] == {"cupy": "pip install 'gputop[cuda12]' or 'gputop[cuda13]'"}


@pytest.mark.slow
def test_list_shows_dataloader_without_numpy(folder):
    """The new user's case: numpy not installed, dataloader imports it at its top."""
    r = gputop("--list", "--json", path=folder, prelude="import sys; sys.modules['numpy'] = None; ")
    assert r.returncode == exitcodes.OK and r.stderr == ""
    w = next(w for w in json.loads(r.stdout) if w["name"] == "dataloader")
    assert w["runnable"] is False and "numpy" in w["needs"] and "numpy" in w["not_installed"]
    assert w["install"]["numpy"] == "pip install numpy"
    r = gputop("--list", path=folder, prelude="import sys; sys.modules['numpy'] = None; ")
    assert "needs numpy: pip install numpy (not installed)" in block(r.stdout, "dataloader")


# -- --run: one line, one document, exit 4 -------------------------------------------------------
@pytest.mark.slow
def test_run_of_a_workload_whose_top_level_import_is_missing_is_one_line(folder):
    r = gputop("--run", "needs_absent", "--device", "cpu", path=folder)
    assert lines(r.stderr) == [f"gputop: workload 'needs_absent' needs {ABSENT}: {HINT}"]
    assert r.stdout == ""
    r = gputop("--run", "needs_absent", "--device", "cpu", "--json", path=folder)
    assert len(lines(r.stderr)) == 1 and "Traceback" not in r.stderr
    doc = one_document(r.stdout)
    assert doc["workload"] == "needs_absent" and doc["exit_code"] == r.returncode != exitcodes.OK
    assert len(doc["errors"]) == 1 and HINT in doc["errors"][0]["message"]


@pytest.mark.slow
def test_run_of_a_workload_whose_top_level_import_is_missing_exits_4(folder):
    r = gputop("--run", "needs_absent", "--device", "cpu", "--json", path=folder)
    assert r.returncode == exitcodes.MISSING_DEPENDENCY
    doc = one_document(r.stdout)
    assert doc["exit_code"] == exitcodes.MISSING_DEPENDENCY and doc["errors"][0]["kind"] == "missing_dependency"


@pytest.mark.slow
def test_run_of_a_workload_whose_import_in_run_is_missing_exits_4(folder):
    r = gputop("--run", "needs_absent_in_run", "--device", "cpu", path=folder)
    assert r.returncode == exitcodes.MISSING_DEPENDENCY
    assert lines(r.stderr) == [f"gputop: needs_absent_in_run missing_dependency: this workload needs {ABSENT}: "
                               f"{HINT} (0 point(s) kept)"]
    r = gputop("--run", "needs_absent_in_run", "--device", "cpu", "--json", path=folder)
    assert r.returncode == exitcodes.MISSING_DEPENDENCY and "Traceback" not in r.stderr
    doc = one_document(r.stdout)
    assert doc["status"] == "missing_dependency" and doc["exit_code"] == exitcodes.MISSING_DEPENDENCY
    assert doc["errors"][0]["kind"] == "missing_dependency" and HINT in doc["errors"][0]["message"]


def test_the_script_itself_exits_4_when_run_imports_a_missing_module(folder):
    """``python workloads/X.py`` on its own: the same one line and exit code."""
    r = subprocess.run([sys.executable, str(folder / "needs_absent_in_run.py"), "--device", "cpu"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == workload_script.EXIT_MISSING_DEPENDENCY == exitcodes.MISSING_DEPENDENCY
    assert lines(r.stderr) == [f"error: this workload needs {ABSENT}: {HINT}"]


def test_roofline_on_the_cpu_without_numpy_exits_4():
    code = ("import sys, runpy; sys.modules['numpy'] = None; "
            "sys.argv = ['roofline.py', '--device', 'cpu', '--quick', '--events']; "
            f"runpy.run_path({str(ROOT / 'workloads' / 'roofline.py')!r}, run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == exitcodes.MISSING_DEPENDENCY, r.stderr
    events = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
    err = next(e for e in events if e["event"] == "error")
    assert err["kind"] == "missing_dependency" and err["message"] == "this workload needs numpy: pip install numpy"


# -- the registry --------------------------------------------------------------------------------
def test_registry_keeps_the_spec_and_get_refuses_it(folder):
    reg = Registry([folder])
    assert reg.errors == []
    spec = reg.specs["needs_absent"]
    assert spec.missing == [ABSENT] and not spec.runnable and spec.needs == ["torch", ABSENT]
    with pytest.raises(MissingWorkloadDependency) as ei:
        reg.get("needs_absent")
    assert isinstance(ei.value, UnknownWorkload) and ei.value.missing == [ABSENT]
    assert str(ei.value) == f"workload 'needs_absent' needs {ABSENT}: {HINT}"
    assert reg.get("needs_absent_in_run").runnable
    assert not any(m == ABSENT or m.startswith(ABSENT + ".") for m in sys.modules)


def test_two_missing_modules_are_both_named(tmp_path):
    (tmp_path / "two.py").write_text(
        "import gputop_test_absent_a\nfrom gputop_test_absent_b import x\nfrom gputop.workload import Param\n"
        "NAME = 'two'\nDESCRIPTION = 'two missing'\nPARAMS = [Param('n', 'int', x)]\ndef run(p, emit):\n    pass\n")
    spec = Registry([tmp_path]).specs["two"]
    assert spec.missing == ["gputop_test_absent_a", "gputop_test_absent_b"]


@pytest.mark.parametrize("source,says", [
    ("def oops(:\n", "SyntaxError"),
    ("from gputop.no_such_module import x\n", "gputop.no_such_module"),
    ("from gputop.workload import NoSuchName\n", "NoSuchName"),
    ("import email.no_such_submodule\n", "email.no_such_submodule"),  # an installed package lacks a piece
    ("import beside\n", "beside"),  # a module beside the workload, not something to install
    ("raise RuntimeError('module-level bug')\n", "module-level bug"),
], ids=["syntax", "gputop-module", "gputop-name", "submodule", "beside", "raises"])
def test_real_errors_are_reported_as_broken_not_as_a_need(tmp_path, source, says):
    (tmp_path / "beside.py").write_text("raise ImportError('beside.py is only a helper')\n")
    (tmp_path / "w.py").write_text(source + "from gputop.workload import Param\nNAME = 'w'\nDESCRIPTION = 'd'\n"
                                            "PARAMS = [Param('n', 'int', 1)]\ndef run(p, emit):\n    pass\n")
    reg = Registry([tmp_path])
    assert "w" not in reg.specs
    err = next(e for e in reg.errors if "w.py" in e)
    assert says in err and "needs" not in err


def test_exit_codes_have_one_home():
    assert (workload_script.EXIT_OK, workload_script.EXIT_FAILED, workload_script.EXIT_USAGE,
            workload_script.EXIT_MISSING_DEPENDENCY, workload_script.EXIT_INTERRUPTED) == (
        exitcodes.OK, exitcodes.FAILED, exitcodes.USAGE, exitcodes.MISSING_DEPENDENCY, exitcodes.INTERRUPTED)
