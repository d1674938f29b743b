"""gputop works three ways, and finds workloads/, kernels/ and its data in each:
a wheel installed into a fresh venv and run from another folder, an editable install, and the
checkout itself with PYTHONPATH=. (how it runs on the GPU machine).

The fresh venvs get gputop itself installed for real; its dependencies (textual, psutil, ...) are
borrowed from the test's own environment through a .pth file, so no network is needed. That cannot
show a dependency missing from pyproject.toml (the test environment has it): the wheel's Requires-Dist
is checked instead, and with GPUTOP_TEST_PIP_INSTALL=1 a real ``pip install .`` into a venv that
borrows nothing (it needs the package index; about 30 s) checks what a new user gets.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def run(cmd, cwd, env=None, timeout=180):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd}\n{r.stdout}\n{r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory) -> Path:
    """The checkout's files (tracked and untracked-not-ignored), as CI's clean clone has them."""
    dst = tmp_path_factory.mktemp("src") / "gputop-src"
    files = run(["git", "ls-files", "-co", "--exclude-standard"], ROOT).split("\n")
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dst / f)
    return dst


def fresh_venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=False).create(path)
    py = path / "bin" / "python"
    site = run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], path).strip()
    # dependencies from this environment, after the venv's own site-packages
    (Path(site) / "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return py


def pip(py: Path, *args, cwd):
    # --ignore-installed: the borrowed site-packages may hold gputop itself (scripts/test installs it
    # editable there); pip would call that "already satisfied" and install nothing into the venv
    return run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                "--no-build-isolation", "--ignore-installed", *args], cwd)


def imports_in(name: str, text: str) -> set[str]:
    """The modules a file of the wheel imports, at any depth (an import inside a function fails only when it runs),
    relative imports resolved; ``from x import y`` counts x and x.y."""
    package = name[:-3].split("/")[:-1]  # gputop/a/b.py and gputop/a/__init__.py: gputop.a
    out = set()
    for node in ast.walk(ast.parse(text, name)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join((package[:len(package) - node.level + 1] if node.level else [])
                            + ([node.module] if node.module else []))
            out |= {base} | {f"{base}.{a.name}" for a in node.names}
    return out


def check_install(bin_dir: Path, workdir: Path, expect_under: Path):
    """Run the installed gputop from ``workdir`` (not the checkout) and check what it finds."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    gputop = str(bin_dir / "gputop")
    py = str(bin_dir / "python")
    assert run([gputop, "--version"], workdir, env).startswith("gputop ")
    where = json.loads(run([py, "-c", "import json, gputop.paths as p; print(json.dumps("
                                      "[str(p.workloads_dir()), str(p.kernels_dir())]))"], workdir, env))
    for d in where:
        assert Path(d).resolve().is_relative_to(expect_under.resolve()), (d, expect_under)
    assert (Path(where[1]) / "roofline.cu").is_file()
    doc = json.loads(run([gputop, "--demo", "--once", "--json"], workdir, env))
    assert doc["gpus"][0]["static"]["name"] == "NVIDIA H200"
    listing = run([gputop, "--list"], workdir, env)
    assert "roofline" in listing
    assert "usage" in run([py, str(Path(where[0]) / "roofline.py"), "--help"], workdir, env)
    doc = json.loads(run([gputop, "--run", "roofline", "--device", "cpu", "--quick", "--json"], workdir, env))
    assert doc["status"] == "ok" and doc["points"]


def test_wheel_in_a_fresh_venv(source_copy, tmp_path):
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist),
         str(source_copy)], tmp_path)
    wheel = next(dist.glob("gputop-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for must in ("gputop/workloads/roofline.py", "gputop/kernels/roofline.cu", "gputop/data/demo.jsonl.gz",
                 "gputop/schema/once.schema.json", "gputop/schema/run.schema.json", "gputop/cli/__init__.py",
                 "gputop/export/server.py", "gputop/export/dcgm_names.py"):
        assert must in names, must
    assert not any(n.startswith(("tests/", "bench/", "workloads/", "kernels/")) for n in names)
    # gputop.evaluate (labelled traces, calibration) is for the tests and bench/ only: not in the wheel, and no module
    # the wheel holds imports it (at any depth: an import inside a function would fail only when it runs)
    assert not any(n.startswith("gputop/evaluate/") for n in names)
    with zipfile.ZipFile(wheel) as zf:
        for n in sorted(x for x in names if x.endswith(".py")):
            bad = {m for m in imports_in(n, zf.read(n).decode()) if m.split(".")[:2] == ["gputop", "evaluate"]}
            assert not bad, f"{n} imports {sorted(bad)}, which the wheel lacks"
    # what pip resolves when it installs the wheel: numpy comes with gputop, not only with an extra
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    requires = [ln.split(":", 1)[1].strip() for ln in meta.splitlines() if ln.startswith("Requires-Dist:")]
    assert any(r.startswith("numpy") and "extra ==" not in r for r in requires), requires
    assert any(r.startswith("prometheus-client") and "extra ==" not in r for r in requires), requires  # --export
    py = fresh_venv(tmp_path / "venv")
    pip(py, str(wheel), cwd=tmp_path)
    site = Path(run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path).strip())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    check_install(py.parent, elsewhere, site)


def test_editable_install(source_copy, tmp_path):
    py = fresh_venv(tmp_path / "venv")
    pip(py, "-e", str(source_copy), cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    check_install(py.parent, elsewhere, source_copy)


def test_checkout_with_pythonpath(source_copy, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(source_copy))
    where = run([sys.executable, "-c", "import gputop.paths as p; print(p.kernels_dir())"], tmp_path, env).strip()
    assert Path(where) == source_copy / "kernels"
    assert "roofline" in run([sys.executable, "-m", "gputop", "--list"], tmp_path, env)
    # the teaching scripts run on their own from the checkout, without PYTHONPATH
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    assert "usage" in run([sys.executable, "workloads/roofline.py", "--help"], source_copy, bare)


@pytest.mark.skipif(os.environ.get("GPUTOP_TEST_PIP_INSTALL") != "1",
                    reason="GPUTOP_TEST_PIP_INSTALL=1: a real `pip install .` through the package index (about 30 s)")
def test_pip_install_brings_what_the_workloads_need(source_copy, tmp_path):
    venv.EnvBuilder(with_pip=True).create(tmp_path / "venv")  # no system site-packages, nothing borrowed
    py = tmp_path / "venv" / "bin" / "python"
    run([str(py), "-m", "pip", "install", "-q", str(source_copy)], tmp_path, timeout=600)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    gputop = str(py.parent / "gputop")
    listed = {w["name"]: w for w in json.loads(run([gputop, "--list", "--json"], elsewhere, env))}
    builtin = {p.stem for p in (ROOT / "workloads").glob("*.py") if not p.name.startswith("_")}
    assert builtin <= set(listed)
    assert all(listed[n]["runnable"] for n in builtin), {n: listed[n]["not_installed"] for n in builtin}
    doc = json.loads(run([gputop, "--run", "roofline", "--device", "cpu", "--quick", "--json"], elsewhere, env))
    assert doc["status"] == "ok" and doc["points"]
