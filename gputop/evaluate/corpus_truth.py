"""The single-GPU corpus's ground truth (bench/gpu/corpus_gpu.sh): the rule that labels a program from its
torch.profiler breakdown (:func:`label_from_profile`; bench/gpu/corpus/_corpus.py measures the breakdown in the
program and says why the rule is what it is), and a corpus trace's timed loop marked with its label (the corpus
script runs this per case):

    python -m gputop.evaluate.corpus_truth TRACE TRUTH.json OUT [--log LOG --seconds S]

Writes TRACE to OUT with two marks added: ``steady loop expect=<label>`` where the program's timed loop
began and ``loop done`` where it ended (the truth's ``loop``, seconds since the process started = the
trace's time since its "started" mark). That stretch is the labelled window of the calibration and
tests/test_classify_traces.py: the program's import, compile and warm-up before it, and its profiling and
exit after it, are not the labelled work.

``--log LOG --seconds S``: relabel a truth written before the rule was fixed (the
first H100 run, 2026-11-23): its "busy" divided the profiled kernel time by the profiled wall time. The step
time without the profiler is S over the loop's step count in LOG ("N steps"); busy and the kernel rate are
recomputed with it and the label re-derived by ``label_from_profile``. Such a truth has no loop times: the
loop is taken as the S seconds that end where the profiled steps began (the GPU's last work less the
profiled wall time; for a construction truth, no profiling: the GPU's last work), "GPU work" being NVML's
duty cycle >= 5% or SMs >= 1% active (gputop.analysis.evidence.is_busy).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys

from gputop.analysis.evidence import is_busy
from gputop.telemetry.trace import read_trace

STEPS_RE = re.compile(r"^(\d+) (steps|calls|generations)", re.M)


def label_from_profile(busy: float, gemm_share: float, mean_kernel_us: float, kernels_per_s: float,
                       data_wait_share: float | None = None) -> str:
    """The label of a profiled program (the rules in bench/gpu/corpus/_corpus.py's docstring, in order): ``busy``
    the GPU's kernel time over the step time, ``gemm_share`` GEMM/conv/attention's share of the kernel time,
    ``data_wait_share`` the step's wait for a host input pipeline (None: the program has none)."""
    if mean_kernel_us < 30 and kernels_per_s > 2000 and busy < 0.60:
        return "latency-bound"
    if busy < 0.10:
        return "host-bound"
    if busy < 0.60:
        return "input-starved" if (data_wait_share or 0.0) > 0.05 else "host-bound"
    return "compute-bound" if gemm_share >= 0.5 else "memory-bound"


def relabel_old(truth: dict, log_text: str, seconds: float, pipeline: str | None) -> dict:
    """The 2026-11-23 truth under the fixed rule (see the module's docstring)."""
    m = STEPS_RE.search(log_text)
    t = dict(truth)
    t["loop_steps"] = int(m.group(1)) if m else None
    if truth.get("by") != "torch.profiler" or not t["loop_steps"]:
        return t
    wall, steps = truth["wall_s"], truth["steps"]
    kernel_s = truth["busy"] * wall / steps
    step_s = seconds / t["loop_steps"]
    count = truth["kernels_per_s"] * wall / steps
    t.update(profiled_wall_s=wall, kernel_s_per_step=round(kernel_s, 6), step_s=round(step_s, 6),
             busy=round(min(1.0, kernel_s / step_s), 3), kernels_per_s=round(count / step_s, 1),
             input_pipeline=pipeline, old_label=truth["label"], relabelled="gputop/evaluate/corpus_truth.py --log")
    t.pop("wall_s", None)
    # The first run did not measure the DataLoader wait: a program whose host-side work is a DataLoader
    # (the only thing it does besides launching its step) is taken to wait on it when the GPU is under 60%.
    t["data_wait_share"] = None
    wait = 1.0 if pipeline else None
    t["label"] = label_from_profile(t["busy"], t["gemm_share"], t["mean_kernel_us"], t["kernels_per_s"], wait)
    if pipeline and t["label"] == "input-starved":
        t["note"] = "DataLoader wait not measured in this run: assumed > 5% (the step's only other host work)"
    return t


def loop_window(truth: dict, rows: list[dict], seconds: float | None) -> tuple[float, float] | None:
    if truth.get("loop"):
        return tuple(truth["loop"])
    if seconds is None:
        return None
    busy = [r["t"] for r in rows if r["type"] == "tick" and is_busy(r["gpus"][0])]
    if not busy:
        return None
    end = busy[-1] - (truth.get("profiled_wall_s") or 0.0)
    return end - seconds, end


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("truth")
    ap.add_argument("out")
    ap.add_argument("--log", help="relabel an old truth: the program's log (its step count)")
    ap.add_argument("--seconds", type=float, help="the loop's --seconds (with --log)")
    ap.add_argument("--pipeline", help="with --log: the program's host input pipeline, e.g. DataLoader(workers=8)")
    a = ap.parse_args(argv)
    truth = json.load(open(a.truth))
    if a.log:
        truth = relabel_old(truth, open(a.log, errors="replace").read(), a.seconds, a.pipeline)
        json.dump(truth, open(a.truth, "w"), indent=1)
    header, rows = read_trace(a.trace)
    win = loop_window(truth, rows, a.seconds)
    if win is None or not truth.get("label"):
        print(f"{a.trace}: no loop times or no label: not marked", file=sys.stderr)
        return 1
    rows = [r for r in rows if not (r["type"] == "mark" and ("expect=" in r["label"] or r["label"] == "loop done"))]
    rows += [{"type": "mark", "t": round(win[0], 4), "label": f"steady loop expect={truth['label']}"},
             {"type": "mark", "t": round(win[1], 4), "label": "loop done"}]
    rows.sort(key=lambda r: (r["t"], r["type"] != "tick"))
    opener = gzip.open if a.out.endswith(".gz") else open
    with opener(a.out, "wt") as f:
        f.write(json.dumps(header) + "\n")
        for r in rows:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    print(f"{a.out}: {truth['label']} ({truth.get('by')}), loop {win[0]:.1f}-{win[1]:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
