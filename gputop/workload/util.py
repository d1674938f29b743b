"""Small helpers the teaching workloads use while they run: timing statistics, the torch device and TF32
switches, a small CNN, what joins two GPUs, and the verdicts at the end of a run by hand.

Workload scripts (``workloads/*.py``) import this next to :mod:`gputop.workload`. Nothing here
imports torch or cupy: the torch helpers take the ``torch`` module as an argument. Reading a run
document is the lessons' (:mod:`gputop.lessons.docs`).
"""

from __future__ import annotations

import math

from gputop.analysis.verdict import display_name

NOISE_LIMIT_PCT = 5.0  # seed 003: warn when the RMS of repeated timings exceeds 5 % of their mean


def stats(samples) -> dict:
    """mean, min, max and the RMS deviation in % of the mean of repeated measurements."""
    xs = [float(x) for x in samples if x is not None and math.isfinite(float(x))]
    if not xs:
        return {"n": 0, "mean": None, "min": None, "max": None, "rms_pct": None}
    mean = sum(xs) / len(xs)
    rms = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
    return {"n": len(xs), "mean": mean, "min": min(xs), "max": max(xs),
            "rms_pct": 100.0 * rms / mean if mean else None}


def noise_check(emit, label: str, samples, limit_pct: float = NOISE_LIMIT_PCT) -> dict:
    """``stats(samples)``, and a ``noisy_timing`` warning when the RMS is above ``limit_pct``."""
    s = stats(samples)
    if s["n"] >= 2 and s["rms_pct"] is not None and s["rms_pct"] > limit_pct:
        emit.warning(f"{label}: timing noise {s['rms_pct']:.1f}% RMS over {s['n']} repeats (> {limit_pct:g}%); "
                     "treat this figure with care", code="noisy_timing")
    return s


def torch_device(torch, name: str) -> tuple:
    """(torch.device, a description for the ``started`` event) for "cuda" (its device 0) or "cpu"."""
    if name == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("CUDA is not available to torch (no GPU, or a CPU-only torch build); "
                               "try --device cpu")
        dev = torch.device("cuda", 0)
        props = torch.cuda.get_device_properties(dev)
        return dev, {"kind": "cuda", "name": props.name, "torch": torch.__version__,
                     "cuda": torch.version.cuda, "cc": f"{props.major}.{props.minor}",
                     "memory_bytes": int(props.total_memory), "sms": props.multi_processor_count}
    import platform

    return torch.device("cpu"), {"kind": "cpu", "name": platform.processor() or platform.machine(),
                                 "torch": torch.__version__, "threads": torch.get_num_threads()}


def tf32_flags(torch) -> dict:
    """The TF32 switches as PyTorch has them now (cuDNN's is on by default, matmul's off)."""
    flags = {"matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
             "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
             "float32_matmul_precision": torch.get_float32_matmul_precision()}
    return flags


def set_tf32(torch, on: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def small_cnn(torch, width: int, classes: int = 10, blocks: int = 2):
    """A ResNet-flavoured CNN for 3-channel images: three stages of ``blocks`` 3x3 convs (width, 2x and
    4x channels; the second and third stages start by halving the resolution), each conv followed by
    BatchNorm and ReLU, then global average pooling and a linear head."""
    nn = torch.nn
    layers, cin = [], 3
    for stage, mult in enumerate((1, 2, 4)):
        for i in range(blocks):
            cout = width * mult
            stride = 2 if stage and i == 0 else 1
            layers += [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]
            cin = cout
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


class Timer:
    """Wall time of a block of GPU work: synchronizes before reading the host clock (seed 001).

    ``with Timer(sync) as t: ...`` then ``t.seconds``; ``sync`` is e.g. ``torch.cuda.synchronize``
    (or a no-op on CPU).
    """

    def __init__(self, sync=None):
        self.sync = sync or (lambda: None)
        self.seconds = 0.0

    def __enter__(self):
        import time

        self.sync()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        import time

        self.sync()
        self.seconds = time.perf_counter() - self._t0
        return False


# -- what joins the GPUs, and what gputop concludes ----------------------------------------------------

def link_facts(uuids: list[str]) -> dict | None:
    """What joins the first two GPUs of ``uuids`` (CUDA's order, as "GPU-..." strings), read through NVML:
    ``gputop.telemetry.static.read_link`` (None when NVML cannot see them). NVML opens no CUDA context."""
    from gputop.telemetry.nvml import Nvml
    from gputop.telemetry.static import device_count, read_link, read_uuid

    nvml = Nvml()
    if len(uuids) < 2 or not nvml.available():
        return None
    nvml_uuids = [read_uuid(nvml, i) for i in range(device_count(nvml))]
    try:
        a, b = (nvml_uuids.index(u) for u in uuids[:2])
    except ValueError:
        return None
    return read_link(nvml, a, b)


def analyzed(workload: str, doc: dict) -> dict:
    """``doc`` as gputop judges it: the lesson of ``workload`` (:func:`gputop.lessons.lesson`) runs its
    ``analyze`` on it; unchanged when there is no lesson of that name."""
    from gputop.lessons import lesson

    found = lesson(workload)
    if found is not None:
        found.analyze(doc)
    return doc


def print_verdicts(workload: str, p: dict, info: dict, points: list[dict], results: dict,
                   stream=None) -> None:
    """A workload run on its own (no gputop): its results as labelled lines, its key figure and the verdicts
    of its ``analyze`` at the end, without the telemetry and peaks that ``gputop --run`` adds."""
    import sys

    from gputop.lessons import figures
    from gputop.lessons.report_lines import result_lines, verdict_lines

    stream = sys.stdout if stream is None else stream
    doc = {"workload": workload, "params": p, "device": {"peaks": None, **info}, "points": [dict(q) for q in points],
           "results": dict(results), "warnings": [], "verdict": None,
           "phases": [{"name": name, "telemetry": None} for name in dict.fromkeys(
               q["phase"] for q in points if q.get("phase") is not None)]}
    analyzed(workload, doc)
    out = ["", "results:", *result_lines(doc["results"])] if doc["results"] else []
    drawing = figures.figures_text(doc, *figures.size_for(stream), figures.wants_color(stream))
    out += ["", drawing] if drawing else []
    judged = [ph for ph in doc["phases"] if ph.get("verdict")]
    if judged:
        out += ["", "verdicts (gputop --run adds the GPU's telemetry and peaks):"]
    out += [f"  {ph['name']}: {display_name(ph['verdict'])}: {ph['verdict']['evidence_text']}" for ph in judged]
    out += ["", *verdict_lines(doc["verdict"])] if doc["verdict"] else []
    print("\n".join(out), file=stream, flush=True)
