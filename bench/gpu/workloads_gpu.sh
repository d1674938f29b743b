#!/usr/bin/env bash
# The four teaching workloads on a GPU machine (run from the repo root after `source .whl/use.sh`):
#   bash bench/gpu/workloads_gpu.sh [NAME ...]        (default: dataloader amp batchsize cudagraphs)
#   WITH_TESTS=1 bash bench/gpu/workloads_gpu.sh      also runs tests/test_workloads_gpu.py (needs pytest; ~1 min)
# Each runs as `python -m gputop --run NAME --json` (the runner samples NVML/GPM per phase and calls the
# workload's analyze); if that gives no JSON document, the script itself runs with --events instead.
# Results in $OUT: NAME.json (or NAME.events.jsonl), wl_NAME.jsonl.gz (the run's telemetry, a mark per
# phase), NAME.err, env.txt, summary.md (device, date, command,
# figures and the physics checks, ready for docs/benchmarks.md). Target: under 4 minutes on an H100.
set -u
OUT=${OUT:-/tmp/gputop-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
NAMES=${*:-dataloader amp batchsize cudagraphs}
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  echo "cpus: $(nproc)"; df -h /dev/shm | tail -1
  python3 -c 'import sys, torch, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "numpy", numpy.__version__)'
  python3 -c 'import cupy; print("cupy", cupy.__version__)' 2>&1 | tail -1
  git rev-parse --short HEAD 2>/dev/null
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
for name in $NAMES; do
  echo "== $name  ($(date -u +%H:%M:%S))"
  t0=$(date +%s)
  timeout "${WL_TIMEOUT:-420}" python3 -m gputop --run "$name" --json --record "$OUT/wl_$name.jsonl.gz" \
    > "$OUT/$name.json" 2> "$OUT/$name.err"
  rc=$?
  echo "   gputop --run $name --json: exit $rc in $(( $(date +%s) - t0 )) s"
  if ! python3 -c 'import json, sys; sys.exit(not json.load(open(sys.argv[1]))["points"])' "$OUT/$name.json" 2>/dev/null; then
    echo "   no JSON document with points from gputop (stderr below); running the script directly with --events"
    mv "$OUT/$name.json" "$OUT/$name.gputop-failed.json" 2>/dev/null
    tail -5 "$OUT/$name.err"
    timeout "${WL_TIMEOUT:-420}" python3 "workloads/$name.py" --events > "$OUT/$name.events.jsonl" 2>> "$OUT/$name.err"
    echo "   python workloads/$name.py --events: exit $?"
  fi
  tail -3 "$OUT/$name.err" | sed 's/^/   stderr: /'
done
python3 - "$OUT" $NAMES <<'PY' | tee "$OUT/summary.md"
"""Summarise the runs: figures per phase, verdicts, and the orderings the physics predicts."""
import json, os, sys

out, names = sys.argv[1], sys.argv[2:]


def load(name):
    p = os.path.join(out, f"{name}.json")
    if os.path.exists(p):
        return json.load(open(p)), f"python -m gputop --run {name} --json"
    p = os.path.join(out, f"{name}.events.jsonl")
    if not os.path.exists(p):
        return None, None
    ev = [json.loads(l) for l in open(p) if l.strip().startswith("{")]
    doc = {"status": next((e["status"] for e in ev if e["event"] == "done"), "no done event"), "phases": [],
           "points": [e["data"] for e in ev if e["event"] == "point"], "results": {}, "verdict": None,
           "warnings": [e for e in ev if e["event"] == "warning"], "errors": [e for e in ev if e["event"] == "error"],
           "params": next((e["params"] for e in ev if e["event"] == "started"), {}), "wall_time_s": None,
           "device": {"reported": next((e["device"] for e in ev if e["event"] == "started"), {})}}
    for e in ev:
        if e["event"] == "result":
            doc["results"].update(e["data"])
        if e["event"] == "phase":
            doc["phases"].append({"name": e["name"], "verdict": None, "telemetry": None})
    try:  # the verdicts from the measured points (no telemetry without the runner)
        from gputop.runner.registry import load_spec
        load_spec(os.path.join("workloads", f"{name}.py")).analyze(doc)
    except Exception as exc:  # noqa: BLE001
        print(f"(analyze failed: {type(exc).__name__}: {exc})")
    return doc, f"python workloads/{name}.py --events"


def f(v, nd=3):
    return "n/a" if v is None else (f"{v:.{nd}g}" if isinstance(v, float) else str(v))


def tel(ph, key):
    t = (ph or {}).get("telemetry") or {}
    return (t.get(key) or {}).get("mean")


def check(ok, text):
    print(f"- {'PASS' if ok else 'FAIL'}: {text}")


for name in names:
    doc, cmd = load(name)
    print(f"\n## {name}\n")
    if doc is None:
        print("no output")
        continue
    if doc.get("schema_version") is not None:
        try:
            from gputop.documents import validate
            validate(doc)
            print("run document: valid against gputop/schema/run.schema.json")
        except Exception as exc:  # noqa: BLE001 - reported, the summary goes on
            print(f"run document: NOT valid: {type(exc).__name__}: {str(exc)[:300]}")
    dev = (doc.get("device") or {})
    dname = ((dev.get("static") or {}).get("name")) or (dev.get("reported") or {}).get("name")
    print(f"device: {dname}; started {doc.get('started_at')}; command: `{cmd}`; status {doc['status']}, "
          f"exit {doc.get('exit_code')}, wall {f(doc.get('wall_time_s'))} s")
    for e in doc.get("errors") or []:
        print(f"ERROR {e.get('kind')}: {e.get('message')}")
    phases = {ph["name"]: ph for ph in doc.get("phases") or []}
    pts = doc.get("points") or []
    print()
    if name == "dataloader":
        print("| phase | samples/s | step ms | data wait % | H2D ms | compute ms | workers CPU % | kernel-active % | SM active % | verdict |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for p in pts:
            ph = phases.get(p["phase"])
            print(f"| {p['phase']} | {f(p['samples_per_s'], 4)} | {f(p['step_ms'])} | {f(p['data_wait_pct'])} | "
                  f"{f(p['h2d_ms'])} | {f(p['compute_ms'])} | {f(p['worker_cpu_pct'])} | {f(tel(ph, 'util_gpu_pct'))} | "
                  f"{f(tel(ph, 'sm_active_pct'))} | {((ph or {}).get('verdict') or {}).get('class')} |")
        print()
        if pts:
            check(max(p["samples_per_s"] for p in pts[1:]) > pts[0]["samples_per_s"] if len(pts) > 1 else False,
                  "more workers beat workers=0")
            check((((phases.get(pts[0]["phase"]) or {}).get("verdict") or {}).get("class")) == "input-starved",
                  "workers=0 is input-starved")
    elif name == "amp":
        print("| mode | step ms | samples/s | speedup vs strict FP32 | peak GB | eval loss | tensor % | verdict |")
        print("|---|---|---|---|---|---|---|---|")
        for p in pts:
            ph = phases.get(p["phase"])
            print(f"| {p['phase']} | {f(p['step_ms'])} | {f(p['samples_per_s'])} | {f(p.get('speedup_vs_fp32_strict'))} | "
                  f"{f(p.get('peak_mem_gb'))} | {f(p['eval_loss'], 4)} | {f(tel(ph, 'tensor_pct'))} | "
                  f"{((ph or {}).get('verdict') or {}).get('class')} |")
        print(f"\nTF32 defaults found: {doc['results'].get('tf32_defaults')}\n")
        by = {p["phase"]: p for p in pts}
        if "bf16" in by:
            check((by["bf16"].get("speedup_vs_fp32_strict") or 0) >= 2.0, "bf16 beats strict FP32 by a wide margin (>= 2x)")
        check(bool(pts) and all(p["loss_finite"] and (p.get("eval_loss_rel_diff") or 0) <= 0.1 for p in pts),
              "every loss finite and within 10% of strict FP32's")
    elif name == "batchsize":
        print("| batch | samples/s | step ms | peak GB | SM active % | verdict |")
        print("|---|---|---|---|---|---|")
        for p in pts:
            ph = phases.get(p["phase"])
            if p.get("oom"):
                print(f"| {p['batch']} | OOM | | | | {((ph or {}).get('verdict') or {}).get('class')} |")
                continue
            print(f"| {p['batch']} | {f(p['samples_per_s'], 4)} | {f(p['step_ms'])} | {f(p.get('peak_mem_gb'))} | "
                  f"{f(tel(ph, 'sm_active_pct'))} | {((ph or {}).get('verdict') or {}).get('class')} |")
        r = doc["results"]
        print(f"\nknee: {r.get('knee')}\nend: {r.get('end')}; {r.get('oom_boundary')}\n")
        ok = [p for p in pts if not p.get("oom")]
        if ok:
            best = max(p["samples_per_s"] for p in ok)
            check(ok[0]["samples_per_s"] < 0.5 * best, "throughput rises with the batch (smallest < half the best)")
            gain = [b["samples_per_s"] / a["samples_per_s"] for a, b in zip(ok, ok[1:]) if a["samples_per_s"]]
            check(any(g < 1.1 for g in gain), "throughput flattens (a doubling gains < 1.1x)")
        check(r.get("end") == "oom" and doc["status"] == "ok", "OOM reached and reported cleanly (status ok)")
    elif name == "cudagraphs":
        print("| mode | us per kernel | kernel us | overhead x | V100 ref | verdict |")
        print("|---|---|---|---|---|---|")
        for p in pts:
            if p.get("part") != "kernels" or p.get("skipped"):
                continue
            ph = phases.get(p["phase"])
            print(f"| {p['mode']} | {f(p.get('us_per_kernel'))} | {f(p.get('kernel_us'))} | {f(p.get('overhead_ratio'))} | "
                  f"{f(p.get('v100_reference_us'))} | {((ph or {}).get('verdict') or {}).get('class')} |")
        print("\n| MLP | step ms | speedup vs eager | verdict |\n|---|---|---|---|")
        for p in pts:
            if p.get("part") == "mlp" and not p.get("skipped"):
                ph = phases.get(p["phase"])
                print(f"| {p['phase']} | {f(p['step_ms'])} | {f(p.get('speedup_vs_eager'))} | "
                      f"{((ph or {}).get('verdict') or {}).get('class')} |")
        us = (doc["results"] or {}).get("us_per_kernel") or {}
        print()
        if {"naive", "interleaved", "graph"} <= set(us):
            check(us["graph"] <= us["interleaved"] <= us["naive"], "graph <= interleaved <= naive per-kernel time")
    v = doc.get("verdict")
    if v:
        print(f"\nverdict: **{v['class']}**")
        ev = v["evidence"] if isinstance(v["evidence"], list) else [v["evidence"]]
        for e in ev:
            print(f"  - {e}")
    warn = [w.get("code") for w in doc.get("warnings") or []]
    if warn:
        print(f"\nwarnings: {', '.join(sorted(set(warn)))} ({len(warn)})")
PY
if [ "${WITH_TESTS:-0}" = 1 ] && python3 -c 'import pytest' 2>/dev/null; then
  echo "== GPU tests of the workloads (--quick)"
  python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_workloads_gpu.py 2>&1 | tail -15 | tee "$OUT/gpu_tests.txt"
fi
