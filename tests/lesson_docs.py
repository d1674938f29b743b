"""GPU-shaped run documents of the offload, fusion and transfer workloads, for the tests of their verdicts
and views on a machine without a GPU. The figures are made up from simple cost models (a fixed cost plus
bytes over a bandwidth), not measured: the tests check how analyze() and the views read a document, never
what a GPU does (tests/test_lessons_gpu.py does that on a real one)."""

from __future__ import annotations

LINK = 63e9  # a gen5 x16 link per direction, bytes/s
DRAM = 3.35e12


def _phase(name: str, t: float = 0.0) -> dict:
    return {"name": name, "t_start": t, "t_end": t + 1.0, "duration_s": 1.0, "telemetry": None, "verdict": None}


def _doc(workload: str, phases: list[dict], points: list[dict], results: dict | None = None) -> dict:
    return {"workload": workload, "status": "ok", "params": {}, "phases": phases, "points": points,
            "device": {"kind": "cuda", "peaks": {"pcie_bytes_per_s_per_dir": LINK, "dram_bytes_per_s": DRAM}},
            "results": results or {}, "verdict": None, "warnings": []}


def offload(copy_bps: float = 12e9, fault_bps: float = 1.5e9, fresh_in_curve: bool = False) -> dict:
    """CPU at 200 GFLOP/s (matmul) and 2 G sines/s; the GPU with a 10 us launch, copies at ``copy_bps``.
    A download into fresh host memory (x.cpu()) of 32 MiB or more (glibc maps such blocks anew each time)
    also faults its pages in at ``fault_bps``; ``fresh_in_curve``: gpu+copies downloads that way, as the
    workload did before it reused a host buffer (and without
    the fresh-memory figures, as those documents were)."""
    pts = [{"phase": "first call", "what": "cuda context", "first_ms": 250.0},
           {"phase": "first call", "what": "matmul first call", "op": "matmul", "n": 64, "first_ms": 30.0,
            "warm_ms": 0.02}]
    for op, ks in (("matmul", range(0, 13)), ("sin", range(0, 27, 2))):
        for k in ks:
            n = 1 << k
            if op == "matmul":
                cpu, comp, b = 0.002 + 2 * n ** 3 / 2e11 * 1e3, 0.008 + 2 * n ** 3 / 4e13 * 1e3, 12 * n * n
            else:
                cpu, comp, b = 0.003 + 4 * n / 2e9 * 1e3, 0.01 + 32 * n / 3e12 * 1e3, 8 * n
            h2d, d2h = 0.01 + b * 2 / 3 / copy_bps * 1e3, 0.01 + b / 3 / copy_bps * 1e3
            out_bytes = b // 3 if op == "matmul" else b // 2
            d2h_fresh = d2h + (out_bytes / fault_bps * 1e3 if out_bytes >= 32 << 20 else 0.0)
            fresh_total = h2d + comp + d2h_fresh + 0.01
            if fresh_in_curve:
                d2h = d2h_fresh
            q = {"phase": op, "op": op, "log2": k, "n": n, "flops": 1, "bytes_copied": b, "cpu_ms": cpu,
                 "gpu_copies_ms": h2d + comp + d2h + 0.01, "gpu_ms": comp, "gpu_naive_ms": 0.012 + 0.001 * (k % 3),
                 "h2d_ms": h2d, "compute_ms": comp, "d2h_ms": d2h, "copy_share": (h2d + d2h) / (h2d + d2h + comp)}
            if not fresh_in_curve:  # the documents before the fix had no fresh-memory figures
                q.update(gpu_copies_fresh_ms=fresh_total, d2h_fresh_ms=d2h_fresh)
            pts.append(q)
    return _doc("offload", [_phase("first call"), _phase("matmul", 1), _phase("sin", 2)], pts)


def fusion(fused_bps: float = 3.0e12) -> dict:
    """Every kernel 5 us plus its bytes at 3 TB/s (fused kernels at ``fused_bps``)."""
    pts, phases = [], []
    for fn, eager_kernels in (("nested_sin", 4), ("gelu", 5)):
        for v in ("eager", "compile", "jit"):
            phases.append(_phase(f"{fn} {v}"))
            for k in (16, 20, 24, 28):
                n = 1 << k
                kern = eager_kernels if v == "eager" else 1
                b = 8 * n * kern
                ms = 0.005 * kern + b / (3.0e12 if v == "eager" else fused_bps) * 1e3
                pt = {"phase": f"{fn} {v}", "fn": fn, "variant": v, "log2": k, "n": n, "ms": ms, "kernels_per_call": kern,
                      "bytes_moved": b, "min_bytes": 8 * n, "gb_per_s": b / ms / 1e6, "first_call_s": 1.0}
                if v != "eager":
                    pt["speedup_vs_eager"] = (0.005 * eager_kernels + 8 * n * eager_kernels / 3e12 * 1e3) / ms
                pts.append(pt)
    return _doc("fusion", phases, pts)


def transfer(pageable_bps: float = 11e9, pinned_bps: float = 55e9) -> dict:
    pts, phases = [], []
    for label, bw, lat in (("host memcpy", 12e9, 0.001), ("h2d pageable", pageable_bps, 0.012),
                           ("h2d pinned", pinned_bps, 0.008), ("d2h pageable", pageable_bps * 0.9, 0.012),
                           ("d2h pinned", pinned_bps * 0.98, 0.008)):
        phases.append(_phase(label))
        for k in range(12, 31, 2):
            b = 1 << k
            ms = lat + b / bw * 1e3
            q = {"phase": label, "kind": label, "bytes": b, "ms": ms, "gb_per_s": b / ms / 1e6}
            if label != "host memcpy":
                q["direction"], q["memory"] = label.split()
            pts.append(q)
    up = (1 << 29) / pinned_bps * 1e3
    serial = [("stream 0", "upload", 0, 0.0, up), ("stream 0", "compute", 0, up, up + 0.8),
              ("stream 0", "download", 0, up + 0.8, 2 * up + 0.8)]
    seed = [("upload", "upload", 0, 0.0, up), ("compute", "compute", 0, up + 0.1, up + 0.9),
            ("download", "download", 0, up + 1.0, 2 * up + 1.0)]
    chunked, c = [], up / 8
    for i in range(8):
        chunked += [("upload", "upload", i, i * c, (i + 1) * c), ("compute", "compute", i, (i + 1) * c, (i + 1) * c + 0.1),
                    ("download", "download", i, (i + 1) * c + 0.1, (i + 2) * c + 0.1)]
    modes = {}
    for mode, spans in (("serial", serial), ("seed", seed), ("chunked", chunked)):
        phases.append(_phase(f"streams {mode}"))
        timeline = [{"stream": s, "op": op, "chunk": i, "start_ms": a, "end_ms": b} for s, op, i, a, b in spans]
        total = timeline[-1]["end_ms"] + 0.05
        q = {"phase": f"streams {mode}", "kind": "streams", "mode": mode, "bytes": 1 << 29, "total_ms": total,
             "span_ms": timeline[-1]["end_ms"], "upload_ms": up, "compute_ms": 0.8, "download_ms": up,
             "chunks": 8 if mode == "chunked" else 1}
        if mode != "serial":
            q["speedup_vs_serial"] = modes["serial"]["total_ms"] / total
            q["matches_serial"] = True
        pts.append(q)
        modes[mode] = {"total_ms": total, "span_ms": q["span_ms"], "upload_ms": up, "compute_ms": 0.8,
                       "download_ms": up, "timeline": timeline}
    return _doc("transfer", phases, pts, {"streams": {"bytes": 1 << 29, "chunks": 8, "modes": modes}})
