"""``gputop --run --profile -- CMD`` (issue 27) on a CPU machine: real child processes under a real gputop (on
tests/fake_pynvml: --run -- CMD needs NVML), real torch.profiler windows of CPU ops recorded by the loader
gputop gives the child (gputop/runner/profile_loader), and the pure analysis of a window
(gputop/analysis/attribution.py) on kernel names recorded on the corpus (docs/results, tests/data).

GPU windows (CUDA kernels, busy/idle shares) are validated on a GPU machine, not here."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import loader_util
from gputop import cli
from gputop.analysis.attribution import apply_window, attribute, category
from gputop.analysis.verdict import Verdict
from gputop.session.profiling import JOB_MIN_SECONDS

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "gputop" / "schema" / "monitor.schema.json").read_text())
PY = sys.executable
FAKE_PYNVML = ROOT / "tests" / "fake_pynvml"

# A program "on the GPU": under the fake NVML of gputop() it is in NVML's process list from here (as a process is once
# it has made its CUDA context), so gputop asks it rather than waiting for one that is.
HOLD = """import os
if os.environ.get("GPUTOP_FAKE_NVML_HOLDERS"):
    open(os.path.join(os.environ["GPUTOP_FAKE_NVML_HOLDERS"], str(os.getpid())), "w").close()
"""

# A small training loop: nn.Module calls and optimizer steps (where the loader starts and stops its window).
TRAIN = HOLD + """
import os, sys, time, torch
m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.LayerNorm(64), torch.nn.ReLU())
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(32, 64)
t0 = time.time()
while time.time() - t0 < float(sys.argv[1]):
    loss = m(x).square().mean(); opt.zero_grad(); loss.backward(); opt.step()
print("trained")
sys.exit(3)
"""

# A program that never imports torch nor holds a GPU: it runs until gputop (sampling at 10 Hz) has taken SAMPLES samples
# since it started, past gputop's first chance to ask (GPUTOP_PROFILE_AT=0) however slowly the machine runs gputop, and
# is never asked. It says whether a request ever reached its folder. (GPUTOP_FAKE_NVML_MARK: a byte a sample.)
NOT_ASKED = ("import glob, os, sys, time\n"
             "def samples():\n"
             "    try:\n"
             "        return os.path.getsize(os.environ['GPUTOP_FAKE_NVML_MARK'])\n"
             "    except OSError:\n"
             "        return 0\n"
             "until, end = samples() + 20, time.time() + 60\n"
             "while samples() < until and time.time() < end:\n"
             "    time.sleep(0.02)\n"
             "mine = os.path.join(os.environ['GPUTOP_PROFILE_DIR'], str(os.getpid()))\n"
             "print('requests', len(glob.glob(mine + '/request-*')), 'loaded', os.path.exists(mine + '/loaded.json'))\n")

LOOP = "while time.time() - t0 < float(sys.argv[1])"  # the programs' loops (PLAIN's adds a condition of its own)


def windowed(prog: str) -> str:
    """``prog`` (TRAIN, INFER, ...) with its loop running until its window is written (in its own folder), at most
    argv[1] seconds: torch's profiler takes seconds to start on a busy machine (it imports torch's compiler), and a loop
    of fixed seconds may end before the window has its seconds or steps."""
    assert LOOP in prog
    until = (LOOP + " and not glob.glob(os.path.join(os.environ['GPUTOP_PROFILE_DIR'], str(os.getpid()), "
             "'window-*'))")
    return prog.replace(LOOP, until).replace("import ", "import glob, os, ", 1)


def gputop_env(cwd, env_extra=None) -> dict:
    """gputop's environment (on the fake NVML) in ``cwd``: its command's loaders have their folders in ``cwd/pbase``,
    NVML lists the processes that made a file in ``cwd/holders`` (HOLD in a test's program), and ``cwd/samples`` gets a
    byte a sample."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_") and k != "PYTHONPATH"}
    (Path(cwd) / "holders").mkdir(exist_ok=True)
    env.update(PYTHONPATH=os.pathsep.join([str(FAKE_PYNVML), str(ROOT)]), GPUTOP_PROFILE_DIR=str(Path(cwd) / "pbase"),
               GPUTOP_FAKE_NVML_HOLDERS=str(Path(cwd) / "holders"), GPUTOP_FAKE_NVML_MARK=str(Path(cwd) / "samples"),
               **(env_extra or {}))
    return env


def gputop(*args, cwd, env_extra=None, timeout=90):
    """gputop run to its end in ``cwd`` (:func:`gputop_env`)."""
    return subprocess.run([PY, "-m", "gputop", *args], capture_output=True, text=True, cwd=cwd,
                          env=gputop_env(cwd, env_extra), timeout=timeout)


def gputop_process(*args, cwd, env_extra=None) -> subprocess.Popen:
    """gputop started in ``cwd`` (:func:`gputop_env`), its output piped."""
    return subprocess.Popen([PY, "-m", "gputop", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=cwd, env=gputop_env(cwd, env_extra))


def corpus_kernel_names() -> list[str]:
    """Kernel names recorded by torch.profiler on the corpus' GPU runs (truncated as they were stored)."""
    names = []
    for p in glob.glob(str(ROOT / "docs/results/*/corpus/truth_relabelled/*.json")) + \
            glob.glob(str(ROOT / "tests/data/traces/corpus_multi*/*truth*.json")):
        names += [n for n, _us in json.loads(Path(p).read_text()).get("top_kernels") or []]
    return names


# -- real runs under gputop --------------------------------------------------------------------------------
@pytest.mark.slow
def test_profile_window_of_a_torch_program(tmp_path):
    """The loader records a window of the program's ops; the program's output and exit code are gputop's,
    unchanged; the document (schema 3) holds the window."""
    (tmp_path / "train.py").write_text(windowed(TRAIN))
    r = gputop("--json", "--record", "t.jsonl.gz", "--run", "--profile", "--profile-seconds", "0.5", "--profile-steps",
               "0", "--", PY, "train.py", "60", cwd=tmp_path, env_extra={"GPUTOP_PROFILE_AT": "0.3"})
    assert r.returncode == 3, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["schema_version"] == 3 and doc["command_exit_code"] == 3
    assert "trained" in r.stderr  # --json: the command's stdout goes to stderr, unchanged
    assert "profiler_start" not in r.stderr  # torch's profiler adds no lines to the program's output
    a = doc["attribution"]
    assert a["seconds"] == 0.5 and a["why_none"] is None
    w = a["windows"][0]
    assert w["status"] == "ok" and w["basis"] == "ops" and w["gpu_busy_share"] is None
    assert 0.5 <= w["wall_s"] < 30 and w["steps"] >= 1  # ended after its seconds (the program ran on till then)
    assert w["finding"] is None  # host ops only: no GPU class suggested, the verdict unchanged
    assert "not initialised CUDA" in w["idle"]["why_none"]  # no kernels: no idle breakdown, and why
    cats = {c["category"]: c for c in w["categories"]}
    assert {"GEMM/conv", "normalisation", "optimizer"} <= set(cats)
    assert abs(sum(c["share"] for c in w["categories"]) - 1) < 0.01
    ops = {o["name"]: o for o in w["top_ops"]}
    for name, cat in (("aten::addmm", "GEMM/conv"), ("aten::native_layer_norm", "normalisation")):
        if name in ops:
            assert ops[name]["category"] == cat
            assert ops[name]["count"] >= w["steps"] and ops[name]["mean_us"] > 0
    assert any(o["category"] == "GEMM/conv" for o in w["top_ops"])
    assert w["ops_per_step"] > 10
    assert w["summed_from"] == "raw events" and w["stop_s"] >= 0 and w["summary_s"] >= 0
    # the trace says where the profiler held the program, and a replay leaves that span out as the run did
    from gputop.session.profiling import spans_from_marks
    from gputop.telemetry.trace import ReplaySource

    src = ReplaySource(str(tmp_path / "t.jsonl.gz"), speed=float("inf"))
    spans = spans_from_marks(src.marks)
    assert len(spans) == len([x for x in a["windows"] if x["status"] == "ok"]) >= 1  # a mark for each window
    a0, b0 = spans[0]
    assert b0 - a0 >= w["wall_s"]
    inside = sum(1 for t in src.ticks if a0 <= t["t"] <= b0)
    assert inside > 0 and doc["sampling"]["ticks"] <= len(src.ticks) - inside  # the run left them out


def test_user_sitecustomize_runs_beside_the_loader(tmp_path):
    """A program with the environment gputop gives its command (ProfileWindows.env): the user's own sitecustomize (on
    their PYTHONPATH, after the loader's folder) runs, and so does the loader (its folder and loaded.json)."""
    from gputop.runner.profile_loader import protocol as P
    from gputop.session.profiling import ProfileWindows

    user = tmp_path / "site"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import os\nos.environ['GPUTOP_TEST_USER_SC'] = 'ran'\n")
    prog = ("import os\nmine = os.path.join(os.environ['GPUTOP_PROFILE_DIR'], str(os.getpid()))\n"
            "print('marker', os.environ.get('GPUTOP_TEST_USER_SC'), 'loaded', os.path.exists(mine + '/loaded.json'))\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_")}
    base.update(PYTHONPATH=str(user), GPUTOP_PROFILE_DIR=str(tmp_path / "pbase"))
    pw = ProfileWindows(first_at=None)
    env = pw.env(base)
    assert env["PYTHONPATH"].split(os.pathsep)[1:] == [str(user)] and env[P.RUN_ENV] == pw.token
    r = subprocess.run([PY, "-c", prog], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "marker ran loaded True\n"


@pytest.mark.slow
def test_user_sitecustomize_runs_under_the_loader(tmp_path):
    """The user's own sitecustomize (on their PYTHONPATH, after the loader's folder) still runs under gputop --run
    --profile."""
    user = tmp_path / "site"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import os\nos.environ['GPUTOP_TEST_USER_SC'] = 'ran'\n")
    prog = NOT_ASKED + "print('marker', os.environ.get('GPUTOP_TEST_USER_SC')); sys.exit(4)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_")}
    env["PYTHONPATH"] = os.pathsep.join([str(FAKE_PYNVML), str(ROOT), str(user)])
    env["GPUTOP_PROFILE_DIR"] = str(tmp_path / "pbase")
    env["GPUTOP_FAKE_NVML_HOLDERS"] = str(tmp_path)  # (none)
    env["GPUTOP_FAKE_NVML_MARK"] = str(tmp_path / "samples")
    r = subprocess.run([PY, "-m", "gputop", "--run", "--profile", "--", PY, "-c", prog], capture_output=True,
                       text=True, cwd=tmp_path, env=dict(env, GPUTOP_PROFILE_AT="0"), timeout=60)
    assert r.returncode == 4, r.stderr
    assert "marker ran" in r.stdout and "loaded True" in r.stdout  # text mode: the command's stdout passes through
    assert "profiler windows" in r.stdout and "has imported torch or a CUDA library" in r.stdout


@pytest.mark.slow
def test_a_python_process_without_torch_or_a_gpu_is_never_asked_and_a_non_python_command_gets_one_line(tmp_path):
    """A Python process that holds no GPU and imported neither torch nor a CUDA library (a launcher, multiprocessing's
    resource tracker) is never asked: the document says why there is no window, in one line."""
    r = gputop("--json", "--run", "--profile", "--", PY, "-c", NOT_ASKED, cwd=tmp_path,
               env_extra={"GPUTOP_PROFILE_AT": "0"})
    assert r.returncode == 0, r.stderr
    assert "requests 0 loaded True" in r.stderr  # it carried the loader, and no request reached it
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    a = doc["attribution"]
    assert a["windows"] == [] and "none of the command's Python processes holds a GPU" in a["why_none"]
    assert "\n" not in a["why_none"]

    r = gputop("--json", "--run", "--profile", "--", "sh", "-c", "sleep 0.5; echo shell; exit 5", cwd=tmp_path,
               env_extra={"GPUTOP_PROFILE_AT": "0"})
    assert r.returncode == 5 and "shell" in r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert "not a Python program" in doc["attribution"]["why_none"]


def test_profile_options_go_with_profile_and_a_command_or_a_watch(capsys):
    with pytest.raises(SystemExit) as e:
        cli.parse(["--profile", "--run", "matmul"])
    assert e.value.code == 2
    for argv in (["--profile-seconds", "2", "--run", "--", "true"], ["--profile-steps", "2", "--watch", "1"]):
        with pytest.raises(SystemExit) as e:
            cli.parse(argv)
        assert e.value.code == 2, argv
    args, _ = cli.parse(["--watch", "1", "--profile", "--profile-seconds", "2"])
    assert args.profile and args.profile_seconds == 2.0


def test_without_profile_the_document_has_no_attribution(tmp_path):
    args, command = cli.parse(["--run", "--", "true"])
    assert args.profile is False and args.profile_seconds is None


# -- the analysis of a window --------------------------------------------------------------------------------
def test_corpus_kernel_names_fall_in_their_categories():
    names = corpus_kernel_names()
    assert len(names) > 20
    cats = {n: category(n) for n in names}
    for n, c in cats.items():
        if n.startswith("ncclDevKernel"):
            assert c == "communication", n
        if n.startswith(("Memset", "Memcpy")):
            assert c == "memcpy/memset", n
        if "cutlass" in n and "gemm" in n or n.startswith(("nvjet", "sm90_xmma", "sm80_xmma")):
            assert c == "GEMM/conv", n
        if "fmha" in n or "flash" in n:
            assert c == "attention", n
        if "batch_norm" in n or "layer_norm" in n:
            assert c == "normalisation", n
        if "multi_tensor_apply" in n:
            assert c == "optimizer", n
        if "elementwise_kernel" in n:
            assert c == "elementwise", n
        if "reduce_kernel" in n:
            assert c == "reduction", n
    assert set(cats.values()) >= {"communication", "GEMM/conv", "elementwise", "normalisation", "optimizer"}


def _gpu_window(kernels, wall_s=1.0, busy_s=0.9, steps=10, ops=()):
    """A window in the loader's shape with the given kernels (names from the corpus; durations are inputs of the
    rule under test, not measurements)."""
    return {"wall_s": wall_s, "gpu_busy_s": busy_s, "steps": steps, "ops": list(ops),
            "kernels": [{"name": n, "count": c, "device_us": us} for n, c, us in kernels]}


def _named(prefix):
    return next(n for n in corpus_kernel_names() if n.startswith(prefix))


def test_rules_name_the_categories_and_the_verdict_takes_them_in():
    ew = _named("void at::native::vectorized_elementwise_kernel")
    gemm = _named("void cutlass::Kernel2<cutlass_75_tensorop_bf16")
    a = attribute(_gpu_window([(ew, 400, 600.0), (gemm, 100, 400.0)]))
    assert a["basis"] == "kernels" and a["kernels_per_step"] == 50.0 and a["mean_kernel_us"] == 2.0
    assert a["top_kernels"][0]["name"] == ew and a["top_kernels"][0]["mean_us"] == 1.5
    f = a["finding"]
    assert f["class"] == "memory-bound" and "60% of kernel time in elementwise" in f["text"]
    assert "torch.compile" in f["advice"]
    before = Verdict("memory-bound", confidence=0.7, advice="fuse", evidence_text="DRAM busy")
    after = apply_window(before, a)
    assert after.confidence > 0.7 and after.advice.startswith("60% of kernel time in elementwise")
    other = apply_window(before.copy(cls="compute-bound"), a)
    assert other.confidence < 0.7 and "memory-bound" in other.mixed
    assert apply_window(before, None) is before

    idle = attribute(_gpu_window([(gemm, 10, 100.0)], wall_s=1.0, busy_s=0.2, ops=[
        {"name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "count": 10, "self_cpu_us": 7e5,
         "cpu_us": 7e5, "device_us": 1.0}]))
    assert idle["gpu_idle_share"] == 0.8 and idle["finding"]["class"] == "input-starved"
    assert "idles 80%" in idle["finding"]["text"] and "DataLoader" in idle["finding"]["text"]
    nccl = attribute(_gpu_window([(_named("ncclDevKernel_AllReduce"), 10, 500.0), (gemm, 10, 500.0)]))
    assert nccl["finding"]["class"] == "comms-bound"


def test_many_tiny_kernels_a_forward_pass_are_launch_bound_even_while_the_gpu_idles():
    """Decoding: hundreds of kernels of a few microseconds a token, the GPU idle most of the window between them
    (the host launching them): latency-bound, named per forward pass, not "waiting on the host"; a window whose
    few kernels leave the GPU idle stays host-bound. (Kernel counts and durations are inputs of the rule.)"""
    gemm = _named("void cutlass::Kernel2<cutlass_75_tensorop_bf16")
    ew = _named("void at::native::vectorized_elementwise_kernel")
    decode = dict(_gpu_window([(ew, 2000, 5000.0), (gemm, 840, 3000.0)], wall_s=1.0, busy_s=0.06, steps=10),
                  step_kind="forward pass")
    a = attribute(decode)
    assert a["step_kind"] == "forward pass" and a["kernels_per_step"] == 284.0 and a["gpu_idle_share"] == 0.94
    f = a["finding"]
    assert f["class"] == "latency-bound" and "284 kernels a forward pass (a token when decoding)" in f["text"]
    assert "idle 94%" in f["text"] and "CUDA graphs" in f["advice"]
    few = attribute(_gpu_window([(gemm, 3, 300.0)], wall_s=1.0, busy_s=0.01, steps=1))
    assert few["finding"]["class"] == "host-bound" and few["step_kind"] is None


INFER = HOLD + """
import os, sys, time, torch
m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Sequential(torch.nn.LayerNorm(64), torch.nn.ReLU()))
x = torch.randn(32, 64)
t0 = time.time()
with torch.no_grad():
    while time.time() - t0 < float(sys.argv[1]):
        m(x)
print("inferred")
"""


@pytest.mark.slow
def test_without_an_optimizer_a_step_is_a_top_level_forward_pass(tmp_path):
    """An inference loop (no optimizer, no gradients): the window counts top-level nn.Module calls (a forward pass,
    whatever modules it nests), and --profile-steps N ends it after 10 N of them. A loop that records gradients and has
    no torch.optim optimizer has no steps: its window ends after its seconds."""
    (tmp_path / "grad.py").write_text(windowed(INFER.replace("with torch.no_grad():", "if True:")))
    r = gputop("--json", "--run", "--profile", "--profile-seconds", "0.5", "--profile-steps", "4", "--", PY,
               "grad.py", "60", cwd=tmp_path, env_extra={"GPUTOP_PROFILE_AT": "0.3"})
    w = json.loads(r.stdout)["attribution"]["windows"][0]
    assert w["status"] == "ok" and (w["steps"], w["step_kind"]) == (None, None) and w["wall_s"] >= 0.5
    (tmp_path / "infer.py").write_text(windowed(INFER))
    r = gputop("--json", "--run", "--profile", "--profile-seconds", "30", "--profile-steps", "4", "--", PY,
               "infer.py", "60", cwd=tmp_path, env_extra={"GPUTOP_PROFILE_AT": "0.3"})
    assert r.returncode == 0, r.stderr
    w = json.loads(r.stdout)["attribution"]["windows"][0]
    assert w["status"] == "ok" and (w["steps"], w["step_kind"]) == (40, "forward pass") and w["wall_s"] < 30
    ops = {o["name"]: o for o in w["top_ops"]}
    assert ops["aten::addmm"]["count"] == 40  # one Linear a forward pass: 40 passes recorded, no more
    assert w["ops_per_step"] > 3


COMPILED = HOLD + """
import sys, time, warnings, torch
m = torch.compile(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()), backend="eager")
x = torch.randn(8, 64)
t0 = time.time()
with torch.no_grad():  # inference: a step is a forward pass
    while time.time() - t0 < float(sys.argv[1]):
        m(x)
with warnings.catch_warnings(record=True) as seen:  # after the windows: the program's warnings as they were
    warnings.simplefilter("always")
    torch.nn.modules.module.register_module_forward_pre_hook(lambda mod, a: None)
    m(x)
print("compiled done", len(seen))
"""


@pytest.mark.slow
def test_a_compiled_model_gets_its_window_and_no_warning_it_did_not_ask_for(tmp_path):
    """torch warns when a torch.compile'd module runs while global module hooks exist; the hooks are the window's,
    so that line must not reach the program's output; after the window the program's own warnings are as before
    (its own global hook then warns)."""
    (tmp_path / "compiled.py").write_text(windowed(COMPILED))
    r = gputop("--json", "--run", "--profile", "--profile-steps", "3", "--", PY, "compiled.py", "60", cwd=tmp_path,
               env_extra={"GPUTOP_PROFILE_AT": "0.5"})
    assert r.returncode == 0, r.stderr
    w = json.loads(r.stdout)["attribution"]["windows"][0]
    assert w["status"] == "ok" and (w["steps"], w["step_kind"]) == (30, "forward pass")
    assert "global hooks" not in r.stderr.split("compiled done")[0]
    assert "compiled done 1" in r.stderr  # the program's own hook: torch's warning, as without gputop


@pytest.mark.slow
def test_a_program_with_its_own_profiler_gets_one_line_and_goes_on(tmp_path):
    """The program records with torch.profiler itself: gputop's window stands aside (one line), the program's own
    profile and exit code are intact."""
    prog = TRAIN.replace("t0 = time.time()\n", "prof = torch.profiler.profile(); prof.start()\nt0 = time.time()\n")
    prog = prog.replace('print("trained")', 'prof.stop(); print("own profile", len(prof.key_averages()) > 0)')
    (tmp_path / "own.py").write_text(prog)
    r = gputop("--json", "--run", "--profile", "--", PY, "own.py", "0.5", cwd=tmp_path,
               env_extra={"GPUTOP_PROFILE_AT": "0"})
    assert r.returncode == 3, r.stderr
    assert "own profile True" in r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    w = doc["attribution"]["windows"][0]
    assert w["status"] == "unavailable"  # (whether the request came before the program's profiler started or after)
    assert w["why_none"] in ("the program's own profiler is recording", "the program started its own profiler")


OWN_LATER = TRAIN.replace("while time.time() - t0 < float(sys.argv[1]):", "while time.time() - t0 < 1.5:").replace(
    'print("trained")', """with torch.profiler.profile() as prof:
    for _ in range(5):
        loss = m(x).square().mean(); opt.zero_grad(); loss.backward(); opt.step()
print("own profile ended at", repr(time.time()))
counts = {e.key: e.count for e in prof.key_averages()}
print("own profile", counts.get("aten::addmm"), sum(k.startswith("Optimizer.step") for k in counts))
print("trained")""")


@pytest.mark.slow
def test_a_program_that_starts_its_own_profiler_during_the_window_comes_first(tmp_path):
    """torch keeps one profiling session: the program's own profiler, started while gputop's window records, would
    end the window midway and the window's stop then cut the program's profile (torch prints "disableProfiler called
    but no active profiling session found" into the program's output). The window ends where the program's profiler
    starts, says so, and the program's profile holds all its steps."""
    (tmp_path / "own_later.py").write_text(OWN_LATER)
    r = gputop("--json", "--run", "--profile", "--profile-seconds", "30", "--profile-steps", "0", "--", PY,
               "own_later.py", cwd=tmp_path, env_extra={"GPUTOP_PROFILE_AT": "0.2"})
    assert r.returncode == 3, r.stderr
    assert "own profile 5 1" in r.stderr  # its 5 steps' matmuls and its optimizer's step, in its own profile
    assert "disableProfiler" not in r.stderr and "profiling session" not in r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    w = doc["attribution"]["windows"][0]
    assert w["status"] == "ok" and w["ended_by"] == "the program started its own profiler"
    # it ended where that profiler started: before it ended (not at its seconds, nor at the program's exit)
    own_end = float(r.stderr.split("own profile ended at ")[1].split()[0])
    assert 0 < w["wall_s"] and w["started_at"] + w["wall_s"] < own_end and w["steps"] >= 1


@pytest.mark.slow
def test_a_window_ends_after_its_steps_and_leaves_the_programs_environment_alone(tmp_path):
    """--profile-steps N: the window ends after N optimizer steps however long its seconds; CUPTI's teardown is
    not put in the program's environment (the loader asks for it around its own stop only: a program's own
    profiler stopping with it just before exit hung there), and a program's own setting stays as it was."""
    prog = windowed(TRAIN).replace('print("trained")', 'print("trained", os.environ.get("TEARDOWN_CUPTI"))')
    (tmp_path / "steps.py").write_text(prog)
    for env_extra, said in (({}, "None"), ({"TEARDOWN_CUPTI": "0"}, "0")):
        r = gputop("--json", "--run", "--profile", "--profile-seconds", "30", "--profile-steps", "3", "--", PY,
                   "steps.py", "60", cwd=tmp_path, env_extra={"GPUTOP_PROFILE_AT": "0.3", **env_extra})
        assert r.returncode == 3, r.stderr
        assert f"trained {said}" in r.stderr
        doc = json.loads(r.stdout)
        jsonschema.validate(doc, SCHEMA)
        a = doc["attribution"]
        assert (a["seconds"], a["max_steps"]) == (30, 3)
        w = a["windows"][0]
        assert w["status"] == "ok" and w["steps"] == 3 and w["wall_s"] < 30  # 3 steps, not 30 s


def test_windows_are_asked_when_the_live_verdict_holds_and_when_it_changes(tmp_path, monkeypatch):
    """Frames of the real H200 demo trace, one a second as the session's loop sees them: the first window once a
    busy class has held HOLD_S, another at each change that holds, one at a time, at most MAX_WINDOWS."""
    import time

    from gputop.session.monitor import Monitor
    from gputop.session.profiling import HOLD_S, MAX_WINDOWS, ProfileWindows
    from gputop.telemetry.trace import ReplaySource, demo_trace_path

    mon = Monitor(ReplaySource(demo_trace_path(), speed=float("inf")))
    mon.baseline()
    mon.watch(445)  # the recorded child's pid in the demo trace
    mon.start()
    end = time.monotonic() + 30
    while not mon.sampler.source.finished:
        assert time.monotonic() < end, "the replay did not end in 30 s"
        time.sleep(0.05)
    mon.stop()
    ticks = mon.store.snapshot()
    pw = ProfileWindows(first_at=None)
    folder = loader_util.stand_in(monkeypatch, tmp_path, run=pw.token)  # the command's process, in the test's place
    try:
        t0, i = ticks[0]["t"], 0
        while i < len(ticks):
            j = i
            while j < len(ticks) and ticks[j]["t"] < ticks[i]["t"] + 1.0:
                j += 1
            now = ticks[j - 1]["t"]
            asked = len(pw.asked)
            pw.consider(now - t0, [t for t in ticks[:j] if t["t"] >= now - 30], mon.static[0], mon.peaks[0], 0, 445)
            if len(pw.asked) > asked:
                assert now - pw.live.segment_start >= HOLD_S  # held that long
                assert pw.pending
                pw.consider(now - t0 + 1, [], None, None, None, None)
                assert len(pw.asked) == asked + 1  # one at a time: nothing more until it is answered
                (seq,) = pw.asked[-1]["asked"].seqs.values()
                loader_util.answer(folder, seq, {"status": "unavailable", "reason": "answered by the test"})
            i = j
        reasons = [a["reason"] for a in pw.asked]
        assert 2 <= len(reasons) <= MAX_WINDOWS
        assert reasons[0].startswith("the live verdict held") and "idle" not in reasons[0]
        assert all(r.startswith("the live verdict changed to") for r in reasons[1:])
        classes = [r.split(" to " if " to " in r else " held ")[1].split(" for ")[0] for r in reasons]
        assert all(a != b for a, b in zip(classes, classes[1:]))
        res = pw.result()
        assert [w["why_none"] for w in res["windows"]] == ["answered by the test"] * len(reasons)
    finally:
        pw.close()
    assert Path(folder).exists()  # its process runs on: its folder stays


def test_the_loader_ships_in_the_package():
    import tomllib

    from gputop.runner.profile_loader import LOADER_DIR

    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert "gputop.runner.profile_loader" in packages
    assert (Path(LOADER_DIR) / "sitecustomize.py").is_file()


# -- HTA's idle breakdown (gputop/analysis/idle.py) on a hand-built timeline -----------------------------------
# Two streams; each gap's reason is set by construction (HTA's rules: hta/analyzers/breakdown_analysis.py
# _analyze_idle_time_for_stream). Rows: stream, start, end, launch (us).
SPANS = [
    (7, 0.0, 10.0, 0.0),
    (7, 15.0, 25.0, 2.0),     # launched before the previous ended, gap 5 < 30: kernel wait 5
    (7, 100.0, 110.0, 90.0),  # launched after the previous ended (25): host wait 75
    (7, 160.0, 170.0, 95.0),  # launched in time, gap 50 >= 30: other 50
    (7, 175.0, 180.0, None),  # no launch event found, gap 5: kernel wait 5
    (8, 20.0, 40.0, 1.0),
    (8, 40.0, 50.0, 3.0),     # back to back: kernel wait 0
    (8, 45.0, 60.0, 4.0),     # overlaps the previous (a rounding): no idle time
    (8, 210.0, 220.0, 205.0),  # launched after the previous ended (60): host wait 150
]


def test_idle_breakdown_follows_htas_rules():
    from gputop.analysis.idle import idle_breakdown

    b = idle_breakdown(SPANS, gpu_idle_share=0.4)
    assert b["why_none"] is None and b["streams"] == 2 and b["kernels"] == 9
    assert (b["host_wait_us"], b["kernel_wait_us"], b["other_us"]) == (225.0, 10.0, 50.0)
    assert b["idle_us"] == 285.0
    assert b["shares"] == {"host_wait": round(225 / 285, 4), "kernel_wait": round(10 / 285, 4),
                           "other": round(50 / 285, 4)}
    assert b["window_shares"]["host_wait"] == round(0.4 * 225 / 285, 4)
    assert b["launch_matched_share"] == round(8 / 9, 4)
    per = {s["stream"]: s for s in b["by_stream"]}
    assert per["7"] == {"stream": "7", "host_wait_us": 75.0, "kernel_wait_us": 10.0, "other_us": 50.0}
    assert per["8"] == {"stream": "8", "host_wait_us": 150.0, "kernel_wait_us": 0.0, "other_us": 0.0}
    # the order the rows come in does not matter; HTA's threshold is a parameter
    assert idle_breakdown(list(reversed(SPANS)))["host_wait_us"] == 225.0
    wide = idle_breakdown(SPANS, kernel_wait_us=60.0)
    assert (wide["kernel_wait_us"], wide["other_us"]) == (60.0, 0.0)


def _chrome_trace(spans):
    """SPANS as torch.profiler's chrome trace writes them: kernels and their cudaLaunchKernel runtime events joined
    by correlation id, plus events the reader must skip (CPU ops, flow arrows, a runtime call with no kernel)."""
    base = 1_700_000_000.0  # chrome traces carry large absolute timestamps
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": base, "dur": 300.0, "args": {}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "ts": base + 1, "dur": 1.0,
           "args": {"correlation": 999}}]
    for i, (stream, a, b, launch) in enumerate(spans):
        cat = "gpu_memcpy" if i == 1 else "kernel"
        ev.append({"ph": "X", "cat": cat, "name": f"k{i}", "ts": base + a, "dur": b - a, "tid": stream,
                   "args": {"stream": stream, "correlation": 100 + i}})
        if launch is not None:
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": base + launch, "dur": 1.0,
                       "args": {"correlation": 100 + i}})
            ev.append({"ph": "f", "cat": "ac2g", "id": 100 + i, "ts": base + a})
    return {"traceEvents": ev}


def test_kernel_spans_are_read_from_a_chrome_trace_by_correlation(tmp_path):
    from gputop.analysis.idle import idle_breakdown
    from gputop.runner.profile_loader.kernel_spans import spans_from_events, spans_from_file

    spans, truncated = spans_from_events(_chrome_trace(SPANS)["traceEvents"])
    assert not truncated and len(spans) == len(SPANS)
    assert sorted(map(tuple, spans)) == sorted(SPANS)  # relative to the first event (a kernel at 0 here)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_chrome_trace(SPANS)))
    assert spans_from_file(path)[0] == spans
    b = idle_breakdown(spans_from_file(path)[0])
    assert (b["host_wait_us"], b["kernel_wait_us"], b["other_us"]) == (225.0, 10.0, 50.0)


def test_kernel_spans_are_read_from_torch_profilers_own_events():
    """The loader's first reader: FunctionEvents as torch.profiler keeps them (here built by hand with the fields
    it reads): a kernel's stream is its device_resource_id, its id the correlation id its runtime call shares."""
    from types import SimpleNamespace as NS

    from gputop.runner.profile_loader.kernel_spans import spans_from_function_events

    def ev(device, name, corr, a, b, act, stream=None):
        return NS(device_type=device, name=name, id=corr, time_range=NS(start=a, end=b), activity_type=act,
                  device_resource_id=stream)

    events = []
    for i, (stream, a, b, launch) in enumerate(SPANS):
        events.append(ev("cuda", f"k{i}", 100 + i, a, b, "kernel", stream))
        if launch is not None:
            events.append(ev("cpu", "cudaLaunchKernel", 100 + i, launch, launch + 1, "cuda_runtime"))
    events.append(ev("cpu", "aten::mm", 102, 0.0, 300.0, "cpu_op"))  # torch's own id: must not pass for a launch
    spans, truncated = spans_from_function_events(events, "cuda")
    assert not truncated and sorted(map(tuple, spans)) == sorted(SPANS)
    old = [NS(**{k: v for k, v in vars(e).items() if k != "device_resource_id"}) for e in events]
    assert spans_from_function_events(old, "cuda") is None  # a torch whose events carry no stream: the trace then


def test_a_window_has_an_idle_breakdown_only_with_kernels():
    gemm = _named("void cutlass::Kernel2<cutlass_75_tensorop_bf16")
    win = _gpu_window([(gemm, 9, 90.0)], wall_s=0.001, busy_s=0.0004)
    win["kernel_spans"] = [list(s) for s in SPANS]
    a = attribute(win)
    assert a["gpu_idle_share"] == 0.6
    assert a["idle"]["host_wait_us"] == 225.0 and a["idle"]["window_shares"]["other"] == round(0.6 * 50 / 285, 4)
    assert a["finding"]["class"] == "host-bound"  # idle 60% of the window; the finding quotes HTA's split
    assert "host wait 79% of the idle time between kernels" in a["finding"]["text"]
    cpu = attribute({"wall_s": 1.0, "gpu_busy_s": None, "steps": 3, "kernels": [], "kernel_spans": [],
                     "kernel_spans_why": "the program has not initialised CUDA: no kernels",
                     "ops": [{"name": "aten::mm", "count": 3, "self_cpu_us": 30.0, "cpu_us": 30.0, "device_us": 0.0}]})
    assert cpu["idle"] == {"why_none": "the program has not initialised CUDA: no kernels"}
    assert "CUDA kernels" in attribute(_gpu_window([]))["idle"]["why_none"]
    for w in (a, cpu):
        jsonschema.validate(w["idle"], SCHEMA["properties"]["attribution"]["oneOf"][1]["properties"]["windows"]
                            ["items"]["properties"]["idle"])


def test_each_window_says_how_it_was_taken_and_the_schema_names_it():
    """A job's window (a torch rank started at its step, one started on time by its loader's thread, a CUPTI process):
    the window and each process's part say what started it, whose host ops it holds and when the request was read,
    every field named in the document's schema (monitor.schema.json), which rejects a value it does not name."""
    from gputop.session.profiling import window_from_answers

    gemm = _named("void cutlass::Kernel2<cutlass_75_tensorop_bf16")
    answers = []
    for pid, by, threads, busy in ((101, "step", "all", 0.9), (102, "time", "one", 0.8), (103, None, None, 0.7)):
        a = _gpu_window([(gemm, 9, 90.0)], busy_s=busy)
        a.update(status="ok", pid=pid, started_at=1_800_000_001.0, asked_at=1_800_000_000.25)
        if by is None:
            a["profiler"] = "cupti"  # its answer says neither
        else:
            a.update(started_by=by, ops_threads=threads)
        answers.append(a)
    win = window_from_answers({"seq": 1, "reason": "the test", "t": 2.0}, answers, True)
    assert (win["pid"], win["started_by"], win["ops_threads"], win["request_read_at"]) == (101, "step", "all",
                                                                                              1_800_000_000.25)
    assert [(p["pid"], p["started_by"], p["ops_threads"]) for p in win["per_process"]] == [
        (101, "step", "all"), (102, "time", "one"), (103, None, None)]
    window_schema = SCHEMA["properties"]["attribution"]["oneOf"][1]["properties"]["windows"]["items"]
    named = set(window_schema["properties"])
    assert set(win) <= named, set(win) - named
    assert {"started_by", "ops_threads", "request_read_at"} <= set(window_schema["properties"]["per_process"]["items"]
                                                                   ["properties"])
    schema = {**window_schema, "$defs": SCHEMA["$defs"]}
    jsonschema.validate(win, schema)
    for bad in ({"started_by": "later"}, {"ops_threads": 2}, {"request_read_at": "soon"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**win, **bad}, schema)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**win, "per_process": [{**win["per_process"][0], **bad}]}, schema)


def test_hta_compare_prints_our_breakdown_of_a_saved_trace(tmp_path):
    """bench/tools/hta_compare.py on a chrome trace: gputop's rows (HTA's beside them where HTA is installed; the
    shared venv has no HTA, so it says so in one line)."""
    from gputop.analysis.idle import idle_breakdown

    path = tmp_path / "trace-1-4242.json"  # as the loader keeps it (GPUTOP_PROFILE_KEEP_TRACE)
    path.write_text(json.dumps(_chrome_trace(SPANS)))
    doc = tmp_path / "run.json"  # the run document's window 1 of pid 4242 (its breakdown, stream 8's halved)
    idle = idle_breakdown(SPANS)
    idle["by_stream"][1]["host_wait_us"] = 75.0
    doc.write_text(json.dumps({"attribution": {"windows": [{"seq": 1, "pid": 4242, "idle": idle}]}}))
    r = subprocess.run([PY, str(ROOT / "bench/tools/hta_compare.py"), str(path), "--json", "--document", str(doc)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["gputop"]["totals"] == {"host_wait": 225.0, "kernel_wait": 10.0, "other": 50.0}
    assert out["gputop"]["by_stream"]["8"]["host_wait"] == 150.0
    assert (out["hta"] is None) == bool(out["hta_why_none"])
    assert out["window"]["by_stream"]["8"]["host_wait"] == 75.0 and out["window"]["totals"]["other"] == 50.0
    text = subprocess.run([PY, str(ROOT / "bench/tools/hta_compare.py"), str(path), "--document", str(doc)],
                          capture_output=True, text=True, timeout=60).stdout
    assert "       8 host_wait           150.0" in text and "+75.0" in text  # the window's column and its diff


def test_a_windows_idle_time_made_by_the_profiler_does_not_make_the_finding():
    """A real H100 window of HF GPT-2 training: under the profiler the host ran at a quarter of its pace and the GPU
    "idled 59% waiting on the host"; the same program without --profile is memory-bound with kernels active 95%
    (NVML). The finding is made again without the idle share: its kernels, mostly elementwise/normalisation/
    optimizer (as the hand-run profile says, docs/diagnosis.md); with a GPU NVML saw idle the idle finding stands."""
    from gputop.analysis.attribution import discount_profiler_idle

    data = json.loads((ROOT / "tests/data/attribution/h100_gpt2_train_window.json").read_text())
    w, plain = data["window"], data["verdict_without_profile"]
    assert w["finding"]["class"] == "host-bound" and w["gpu_idle_share"] > 0.5
    got = discount_profiler_idle(w, Verdict.from_dict(plain))
    assert got["finding"]["class"] == "memory-bound" and "elementwise" in got["finding"]["text"]
    assert "torch.compile" in got["finding"]["advice"] and "the profiler's" in got["idle_discounted"]
    idle_gpu = Verdict("host-bound", evidence={"util_gpu_pct": 20.0})
    assert discount_profiler_idle(w, idle_gpu) is w  # NVML saw the GPU idle too: the finding stands


# Two ranks in lockstep (gloo's all-reduce of the gradients every step, on the CPU), started by mp.spawn.
TWO_RANKS = """
import glob, os, socket, sys, time, torch, torch.distributed as dist, torch.multiprocessing as mp

def rank(r, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    open(os.path.join(os.environ["GPUTOP_FAKE_NVML_HOLDERS"], str(os.getpid())), "w").close()  # on the GPU
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(32, 64)
    end = time.time() + 60
    mine = os.path.join(os.environ["GPUTOP_PROFILE_DIR"], str(os.getpid()))
    while not glob.glob(mine + "/request-*") and time.time() < end:
        time.sleep(0.02)  # the window is asked for while the ranks train (each loader reads it on its own clock)
    for step in range(int(sys.argv[1])):
        loss = m(x).square().mean(); opt.zero_grad(); loss.backward()
        for p in m.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        time.sleep(0.005)
    dist.destroy_process_group()

if __name__ == "__main__":
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    mp.spawn(rank, args=(port,), nprocs=2)
    print("both ranks done")
"""


@pytest.mark.slow
def test_the_ranks_of_a_job_start_their_windows_at_the_same_step(tmp_path):
    """A window asked of a job's ranks (asked while they train) records the same steps on each, give or take one:
    a rank profiled alone is slowed by its profiler and the others wait for it in their collectives, which is then
    what their windows record. Each rank answers, with its own 5 optimizer steps or more: a job's window lasts at
    least JOB_MIN_SECONDS, so the ms its ranks begin apart are a small part of it (accelerate on 2 H200s: 11 ms of
    a 0.05 s window, its communication share 15 pt over the program's own)."""
    (tmp_path / "two.py").write_text(TWO_RANKS)
    r = gputop("--json", "--run", "--profile", "--profile-seconds", "30", "--profile-steps", "5", "--", PY,
               "two.py", "500", cwd=tmp_path, env_extra={"GPUTOP_PROFILE_AT": "2"}, timeout=120)
    assert r.returncode == 0 and "both ranks done" in r.stderr, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    w = doc["attribution"]["windows"][0]
    per = [p for p in w["per_process"] if p.get("status", "ok") == "ok"]
    assert w["status"] == "ok" and len(per) == 2, w
    # the ranks on the GPU were asked; mp.spawn's main process and multiprocessing's resource tracker never were
    assert {p["pid"] for p in w["per_process"]} == {int(p.name) for p in (tmp_path / "holders").iterdir()}
    assert all(p["steps"] >= 5 and p["step_kind"] == "optimizer step" for p in per)
    assert all(p["wall_s"] >= JOB_MIN_SECONDS for p in per), per
    assert abs(per[0]["steps"] - per[1]["steps"]) <= 1, per
    (a0, a1), (b0, b1) = [(p["started_at"], p["started_at"] + p["wall_s"]) for p in per]
    overlap = min(a1, b1) - max(a0, b0)
    # the same steps, give or take the one a rank's start fell on (a rank that reached its module call just before
    # the start time starts at the next step, after waiting for the other in the all-reduce)
    assert overlap >= 0.6 * min(a1 - a0, b1 - b0), (a0, a1, b0, b1)


@pytest.mark.slow
def test_a_window_starts_at_the_first_step_after_the_start_time_it_was_given(tmp_path):
    """gputop names a start time half a second ahead of a request (every loader has read it by then: each looks
    every 0.2 s on its own clock), so a job's ranks start at the same step, not 0-0.2 s apart."""
    import time

    from gputop.runner.profile_loader import LOADER_DIR
    from gputop.runner.profile_loader import protocol as P

    # the program notes when each of its steps begins (its module call, then its optimizer step), and trains until
    # its window is written
    stepped = (windowed(TRAIN).replace("t0 = time.time()", "t0, began = time.time(), []")
               .replace("    loss = m(x)", "    began.append(time.time()); loss = m(x)")
               .replace('print("trained")', 'open("began", "w").write(" ".join(map(repr, began))); print("trained")'))
    assert stepped.count("began.append") == 1
    (tmp_path / "train.py").write_text(stepped)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_")}
    env.update({"PYTHONPATH": LOADER_DIR, P.BASE_ENV: str(tmp_path / "pbase")})
    proc = subprocess.Popen([PY, "train.py", "90"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    folder = wait_for_loader(proc, env)
    while "torch" not in (P.read_json(os.path.join(folder, P.LOADED)) or {}).get("frameworks", []):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    start_at = round(time.time() + 5.0, 3)  # as gputop writes it: to the millisecond; the program trains by then
    assert P.ask(folder, P.Request(30, 3, start_at, os.getpid())) == (1, False)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    w = P.read_answer(folder, 1)
    assert w["status"] == "ok" and w["steps"] == 3 and w["started_by"] == "step" and w["protocol"] == P.PROTOCOL
    assert set(w) <= set(P.ANSWER_FIELDS), set(w) - set(P.ANSWER_FIELDS)  # every field the protocol names
    # the first step begun after the start time (k), or the one it fell in: before the step after k began, however
    # long the machine kept the program waiting between its steps
    began = [float(t) for t in (tmp_path / "began").read_text().split()]
    k = next(i for i, t in enumerate(began) if t >= start_at)
    assert start_at <= w["started_at"] < began[k + 1], (w["started_at"] - start_at, began[max(k - 1, 0):k + 2])


def wait_for_loader(proc, env, timeout=60):
    """The folder of ``proc``'s loader once it has one (the process is asked nothing before)."""
    import time

    from gputop.runner.profile_loader import protocol as P

    end = time.monotonic() + timeout
    while True:
        folder, loaded = P.folder_of(proc.pid, env)
        if folder is not None:
            return folder
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "no loader folder for pid %d in %d s" % (proc.pid, timeout)
        time.sleep(0.02)
