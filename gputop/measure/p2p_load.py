"""``gputop --doctor``'s copies between GPUs, in one child process that sees every GPU checked: for each ordered
pair (a, b), a 256 MiB tensor on ``cuda:a`` copied into one on ``cuda:b`` (torch's ``copy_``, which uses peer access
where CUDA allows it: NVLink, or PCIe peer-to-peer; else it stages through the host), timed from a synchronised
start to a synchronised end, repeated for about 30 ms, the median of three such timings.

``python -m gputop.measure.p2p_load [--events] [--wait]``: with ``--wait`` it creates its CUDA contexts first, then
waits for a line on stdin (the parent lets it go once the per-GPU loads are over, so that neither disturbs the
other). Its result event: ``{"pairs": [{"gpus": [a, b], "bytes_per_s", "peer_access", "rms_pct"}]}`` in the
child's CUDA numbering (the parent maps it back to NVML's).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from gputop.workload.emit import Emitter

NBYTES = 256 << 20
TARGET_S = 0.03  # each timing: about this long
TIMINGS = 3


def time_copy(torch, src, dst, a: int, b: int) -> float:
    """Seconds of one copy, calibrated: the median of TIMINGS timings of k copies each (k for ~TARGET_S)."""
    def run(k: int) -> float:
        torch.cuda.synchronize(a)
        torch.cuda.synchronize(b)
        t0 = time.perf_counter()
        for _ in range(k):
            dst.copy_(src)
        torch.cuda.synchronize(a)
        torch.cuda.synchronize(b)
        return (time.perf_counter() - t0) / k

    run(2)  # warm-up: peer access is enabled on the first copy
    k = max(3, min(200, round(TARGET_S / max(run(1), 1e-6))))
    return statistics.median(run(k) for _ in range(TIMINGS))


def pairs(torch, emit) -> list[dict]:
    n = torch.cuda.device_count()
    bufs = [torch.ones(NBYTES // 4, device=f"cuda:{i}") for i in range(n)]
    out = []
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            if emit.should_stop():
                return out
            dst = torch.empty_like(bufs[a], device=f"cuda:{b}")
            secs = time_copy(torch, bufs[a], dst, a, b)
            ok = bool(torch.equal(dst[:1024].cpu(), bufs[a][:1024].cpu()))
            out.append({"gpus": [a, b], "bytes_per_s": NBYTES / secs if ok else None,
                        "peer_access": bool(torch.cuda.can_device_access_peer(a, b)),
                        "error": None if ok else "the copy arrived wrong"})
            del dst
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gputop.measure.p2p_load", description=__doc__.splitlines()[0])
    ap.add_argument("--events", action="store_true")
    ap.add_argument("--wait", action="store_true", help="wait for a line on stdin before measuring")
    a = ap.parse_args(argv)
    emit = Emitter(events=a.events)
    code = 0
    try:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        for i in range(torch.cuda.device_count()):  # the contexts first: seconds each, while the GPUs are loaded
            torch.empty(1, device=f"cuda:{i}")
        emit.started("doctor-p2p", {}, {"kind": "cuda", "count": torch.cuda.device_count()})
        if a.wait:
            emit.phase("p2p-wait")
            if not sys.stdin.readline():
                emit.done()
                return 0
        emit.phase("p2p")
        emit.result({"pairs": pairs(torch, emit)})
    except KeyboardInterrupt:
        emit.status = "interrupted"
        code = 130
    except ModuleNotFoundError as exc:
        emit.error(f"{exc.name or exc} is not installed: pip install 'gputop[torch]'", kind="missing_dependency")
        code = 4
    except Exception as exc:
        emit.error(f"{type(exc).__name__}: {exc}"[:400], kind="cuda" if "cuda" in str(exc).lower() else "exception")
        code = 1
    emit.done()
    return code


if __name__ == "__main__":
    sys.exit(main())
