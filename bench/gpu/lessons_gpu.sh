#!/usr/bin/env bash
# The seed lessons on a GPU machine (from the repo root, after `source .whl/use.sh`):
#   bash bench/gpu/lessons_gpu.sh
# Runs offload, fusion and transfer once each, cold and full size, as
#   python -m gputop --run NAME --json -o $OUT/NAME-<gpu>.json
# then the physics tests (tests/test_lessons_gpu.py) on those documents, and prints the key figures:
# crossover sizes, pinned / pageable GB/s and % of the PCIe link, fusion speed-ups, the streams speed-up.
# Files in $OUT: NAME-<gpu>.json (3), NAME-<gpu>.err (3), lessons-<gpu>.txt (this output). Target: under 3 min.
#   bash bench/gpu/lessons_gpu.sh screens
# instead: TUI screenshots of the three results views from real full-size runs (bench/tools/tui_screens.py:
# $OUT/tui_screens.tar.gz with NAME_results.svg/.txt/.json, and tui_screens.log; ~2 min).
set -u
OUT=${OUT:-/tmp/gputop-lessons}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ "${1:-}" = screens ]; then
  exec timeout 400 python3 bench/tools/tui_screens.py --out "$OUT" --workloads offload,fusion,transfer --full \
    --size 160x48 --timeout 120 --settle 3
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | head -1 | awk '{print tolower($2)}')
gpu=${gpu:-gpu}
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  for name in offload fusion transfer; do
    t0=$SECONDS
    timeout 150 python3 -m gputop --run "$name" --json -o "$OUT/$name-$gpu.json" > /dev/null 2> "$OUT/$name-$gpu.err"
    rc=$?
    printf '%-9s exit %s in %s s\n' "$name" "$rc" "$((SECONDS - t0))"
    tail -3 "$OUT/$name-$gpu.err" | sed 's/^/   stderr: /'
  done
  GPUTOP_LESSON_DOCS="$OUT" timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_lessons_gpu.py 2>&1 | tail -15
  python3 - "$OUT" "$gpu" <<'PY'
import json, sys
from pathlib import Path

out, gpu = Path(sys.argv[1]), sys.argv[2]


def load(name):
    try:
        return json.loads((out / f"{name}-{gpu}.json").read_text())
    except (OSError, ValueError) as exc:
        print(f"{name}: no document ({exc})")
        return None


def verdict(doc):
    v = doc.get("verdict") or {}
    return f"{v.get('class')} ({v.get('subclass')})" if v else "none"


doc = load("offload")
if doc:
    print(f"\n== offload ({doc['wall_time_s']:.1f} s) verdict {verdict(doc)}")
    fc = doc["results"].get("first_call", {})
    print(f"  first call: CUDA context {fc.get('context_ms', 0):.0f} ms; " + ", ".join(
        f"{op} {v['first_ms']:.2f} ms vs {v['warm_ms']:.3f} ms warm" for op, v in fc.items() if isinstance(v, dict)))
    for op, c in (doc["results"].get("crossover_n") or {}).items():
        pts = sorted((q for q in doc["points"] if q.get("op") == op and "gpu_ms" in q), key=lambda q: q["n"])
        big = pts[-1]
        naive = [q["gpu_naive_ms"] for q in pts]
        won = [q["n"] for q in pts if q["gpu_copies_ms"] < q["cpu_ms"]]
        print(f"  {op}: GPU wins with copies from n={c['with_copies']} (won at n={won}), without from "
              f"n={c['without_copies']}; at n={big['n']}: CPU {big['cpu_ms']:.2f} ms, GPU+copies {big['gpu_copies_ms']:.2f} ms "
              f"(copies {100 * big['copy_share']:.0f}%), GPU {big['gpu_ms']:.3f} ms; naive {min(naive):.3f}-{max(naive):.3f} ms")
        if "d2h_fresh_ms" in big:
            out_mb = 4 * big["n"] * (big["n"] if op == "matmul" else 1) / 1e6
            print(f"    download of {out_mb:.0f} MB: {big['d2h_ms']:.2f} ms into the reused buffer "
                  f"({out_mb / big['d2h_ms']:.1f} GB/s), {big['d2h_fresh_ms']:.2f} ms by x.cpu() into fresh memory "
                  f"({out_mb / big['d2h_fresh_ms']:.1f} GB/s); GPU+copies with x.cpu(): {big['gpu_copies_fresh_ms']:.2f} ms")
doc = load("fusion")
if doc:
    print(f"\n== fusion ({doc['wall_time_s']:.1f} s) verdict {verdict(doc)}")
    dram = (doc["device"].get("peaks") or {}).get("dram_bytes_per_s")
    for ph in doc["phases"]:
        pts = sorted((q for q in doc["points"] if q.get("phase") == ph["name"] and q.get("ms")), key=lambda q: q["n"])
        if pts:
            q = pts[-1]
            roof = f" = {100 * q['gb_per_s'] * 1e9 / dram:.0f}% of DRAM" if dram and q.get("gb_per_s") else ""
            sp = f", {q['speedup_vs_eager']:.2f}x eager" if q.get("speedup_vs_eager") else ""
            bw = f"{q['gb_per_s']:.0f} GB/s" if q.get("gb_per_s") else "? GB/s"
            print(f"  {ph['name']:<20} n=2^{q['log2']}: {q['ms']:.3f} ms, {q['kernels_per_call']} kernel(s), {bw}{roof}"
                  f"{sp}; first call {q['first_call_s']:.1f} s")
    for q in doc["points"]:
        if q.get("skipped"):
            print(f"  {q['phase']}: skipped: {q['reason']}")
doc = load("transfer")
if doc:
    print(f"\n== transfer ({doc['wall_time_s']:.1f} s) verdict {verdict(doc)}")
    link = (doc["device"].get("peaks") or {}).get("pcie_bytes_per_s_per_dir")
    print(f"  PCIe link peak per direction: {link / 1e9:.1f} GB/s" if link else "  PCIe link peak: n/a")
    for kind in ("h2d pageable", "h2d pinned", "d2h pageable", "d2h pinned", "host memcpy"):
        pts = sorted((q for q in doc["points"] if q.get("kind") == kind and q.get("gb_per_s")), key=lambda q: q["bytes"])
        if pts:
            big, small = pts[-1], pts[0]
            pct = f" = {100 * big['gb_per_s'] * 1e9 / link:.0f}% of link" if link and kind != "host memcpy" else ""
            print(f"  {kind:<13} {big['bytes'] / 2**20:.0f} MiB: {big['gb_per_s']:.1f} GB/s{pct}; "
                  f"{small['bytes'] / 1024:.0f} KiB: {1e3 * small['ms']:.1f} us")
    for q in doc["points"]:
        if q.get("kind") == "streams":
            sp = f", {q['speedup_vs_serial']:.2f}x serial" if q.get("speedup_vs_serial") else ""
            print(f"  streams {q['mode']:<8} {q['total_ms']:.2f} ms (upload {q['upload_ms']:.2f}, compute "
                  f"{q['compute_ms']:.2f}, download {q['download_ms']:.2f} ms of GPU time){sp}")
PY
} 2>&1 | tee "$OUT/lessons-$gpu.txt"
