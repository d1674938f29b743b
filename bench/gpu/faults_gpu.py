"""The fault matrix on a GPU machine: real signals to a real gputop running real CUDA work.

    source .whl/use.sh; python3 bench/gpu/faults_gpu.py [--out DIR]

Each cell starts gputop in its own session, waits until the run's process is on the GPU (its pid in
NVML's compute-process list), does the fault, and checks: gputop's exit code, the JSON document (stdout
and ``-o``: valid, ``interrupted``/``signal``/``status``), that no process of the run is alive once gputop
has exited (``kill -9`` of gputop: within 3 s, the watchdog's job) and that the GPU no longer lists any of
them. Prints one table row per cell and writes ``faults_gpu.md`` and ``faults_gpu.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pexpect
import psutil
import pynvml

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
# a torch loop that keeps the GPU busy until stopped
TORCH_LOOP = ("import torch, time\nx = torch.randn(4096, 4096, device='cuda')\n"
              "while True:\n    x = (x @ x).tanh_()\n    torch.cuda.synchronize()\n")
# a child that starts a grandchild doing GPU work, then sleeps: the grandchild must go too
TORCH_TREE = (f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {TORCH_LOOP!r}])\n"
              "time.sleep(600)\n")
TORCH_OOM = ("import torch, time\nkeep = [torch.empty(1 << 30, device='cuda')]\ntime.sleep(3)\n"
             "while True:\n    keep.append(torch.empty(8 << 30, dtype=torch.uint8, device='cuda'))\n")


def gpu_pids() -> set[int]:
    pids = set()
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            pids.add(p.pid)
    return pids


def tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root] + root.children(recursive=True)
    except psutil.Error:
        return []


def alive(procs: list[psutil.Process]) -> list[str]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{p.pid} {' '.join(p.cmdline())[:60]}")
        except psutil.Error:
            pass
    return out


class PtyRun:
    """gputop in a pseudo-terminal of its own session (pexpect), with the ``pid``, ``poll``, ``wait`` and ``kill`` of a
    Popen; every byte it writes is kept in ``screen``."""

    def __init__(self, argv: list[str], cwd: Path, env: dict):
        self.child = pexpect.spawn(argv[0], argv[1:], cwd=str(cwd), env=env, dimensions=(40, 120))
        self.pid = self.child.pid
        self.screen = bytearray()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                self.screen.extend(self.child.read_nonblocking(65536, timeout=None))
            except (pexpect.EOF, pexpect.TIMEOUT, OSError, ValueError):
                return

    def poll(self) -> int | None:
        if self.child.isalive():
            return None
        return self.child.exitstatus if self.child.exitstatus is not None else -(self.child.signalstatus or 0)

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(self.child.args, timeout)
            time.sleep(0.02)
        self.reader.join(2.0)  # what it wrote last (the terminal restored) read to the end
        return code

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)


class Cell:
    def __init__(self, name: str, argv: list[str], fault: str, expect_code: int, expect: dict, tui: bool = False):
        self.name, self.argv, self.fault, self.expect_code, self.expect, self.tui = \
            name, argv, fault, expect_code, expect, tui

    def run(self, out: Path) -> dict:
        tmp = Path(tempfile.mkdtemp(prefix="gputop-fault-"))
        doc_path = tmp / "doc.json"
        argv = [PY, "-m", "gputop", *self.argv]
        if not self.tui:
            argv[3:3] = ["--json", "-o", str(doc_path)]
        stdout = open(tmp / "stdout", "wb")
        stderr = open(tmp / "stderr", "wb")
        t0 = time.monotonic()
        if self.tui:
            g = PtyRun(argv, ROOT, dict(os.environ, TERM="xterm-256color"))
        else:
            g = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, cwd=ROOT,
                                 start_new_session=True)
        procs: list[psutil.Process] = []
        on_gpu = False
        end = time.monotonic() + 120
        while time.monotonic() < end and g.poll() is None:  # until a process of the run is on the GPU
            procs = {p.pid: p for p in procs + tree(g.pid)[1:]}.values()
            procs = list(procs)
            if {p.pid for p in procs} & gpu_pids():
                on_gpu = True
                break
            time.sleep(0.1)
        t_gpu = time.monotonic() - t0
        if self.fault.startswith("signal:"):
            sig = getattr(signal, self.fault.split(":")[1])
            os.kill(g.pid, sig)
        elif self.fault == "kill-child":
            child = next((p for p in procs if p.ppid() == g.pid and "-I" not in p.cmdline()), None)
            if child is not None:
                child.kill()
        try:
            code = g.wait(timeout=90)
        except subprocess.TimeoutExpired:
            g.kill()
            code = g.wait()
        t_exit = time.monotonic()
        left = alive(procs)
        if self.fault == "signal:SIGKILL" and left:  # the watchdog's job: give it 3 s
            while left and time.monotonic() - t_exit < 3.0:
                time.sleep(0.05)
                left = alive(procs)
        still_on_gpu = sorted({p.pid for p in procs} & gpu_pids())
        while still_on_gpu and time.monotonic() - t_exit < 3.0:  # the driver lets go of a dead process's context
            time.sleep(0.05)
            still_on_gpu = sorted({p.pid for p in procs} & gpu_pids())
        stdout.close()
        stderr.close()
        problems = []
        if not on_gpu:
            problems.append("never seen on the GPU")
        if code != self.expect_code:
            problems.append(f"exit {code}, expected {self.expect_code}")
        if left:
            problems.append(f"alive: {left}")
        if still_on_gpu:
            problems.append(f"still on the GPU: {still_on_gpu}")
        doc = None
        if self.expect:
            for where, path in (("stdout", tmp / "stdout"), ("-o", doc_path)):
                try:
                    doc = json.loads(path.read_text())
                except (OSError, ValueError) as exc:
                    problems.append(f"{where}: no valid document ({exc})")
                    continue
                for k, v in self.expect.items():
                    got = doc.get(k) if k != "verdict_class" else (doc.get("verdict") or {}).get("class")
                    if got != v:
                        problems.append(f"{where}: {k}={got!r}, expected {v!r}")
        if self.tui:
            on, off = g.screen.rfind(b"\x1b[?1049h"), g.screen.rfind(b"\x1b[?1049l")
            if off < on or off < 0:
                problems.append("terminal not restored")
        row = {"cell": self.name, "fault": self.fault, "exit": code, "expected": self.expect_code,
               "on_gpu_after_s": round(t_gpu, 1), "processes": len(procs), "problems": problems,
               "stderr": (tmp / "stderr").read_text(errors="replace")[-400:] if not self.tui else "",
               "points": len(doc.get("points", [])) if isinstance(doc, dict) and "points" in doc else None}
        keys = ("status", "exit_code", "child_exit_code", "interrupted", "signal", "errors", "warnings", "ended")
        row["document"] = {k: doc.get(k) for k in keys} if isinstance(doc, dict) else None
        if problems and isinstance(doc, dict):
            row["document"]["log"] = (doc.get("log") or [])[-20:]
        return row


def cells() -> list[Cell]:
    run = ["--run", "roofline", "--quick"]
    cmd = ["--run", "--", PY, "-c"]
    cells = []
    for sig, code in (("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)):
        cells.append(Cell(f"roofline_{sig}", run, f"signal:{sig}", code,
                          {"interrupted": True, "signal": sig, "status": "interrupted"}))
        cells.append(Cell(f"command_{sig}", cmd + [TORCH_TREE], f"signal:{sig}", code,
                          {"interrupted": True, "signal": sig, "status": "interrupted"}))
    cells += [
        Cell("roofline_SIGKILL_gputop", run, "signal:SIGKILL", -9, {}),
        Cell("command_SIGKILL_gputop", cmd + [TORCH_TREE], "signal:SIGKILL", -9, {}),
        Cell("roofline_kill_child", run, "kill-child", 5, {"status": "crashed"}),
        Cell("roofline_timeout", run + ["--timeout", "4"], "none", 6, {"status": "timeout"}),
        Cell("command_timeout", ["--timeout", "10", "--run", "--", PY, "-c", TORCH_LOOP], "none", 6,
             {"status": "timeout"}),
        Cell("command_oom", cmd + [TORCH_OOM], "none", 1, {"status": "error", "verdict_class": "memory-capacity"}),
        Cell("tui_command_SIGTERM", ["--tui", "--run", "--", PY, "-c", TORCH_TREE], "signal:SIGTERM", 143, {},
             tui=True),
        Cell("tui_command_SIGHUP", ["--tui", "--run", "--", PY, "-c", TORCH_TREE], "signal:SIGHUP", 129, {},
             tui=True),
    ]
    return cells


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gputop-faults"))
    ap.add_argument("--only", nargs="*", help="cell names")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pynvml.nvmlInit()
    name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
    rows = []
    for cell in cells():
        if args.only and cell.name not in args.only:
            continue
        row = cell.run(out)
        rows.append(row)
        mark = "ok" if not row["problems"] else "FAIL: " + "; ".join(row["problems"])
        print(f"{row['cell']:<26} exit {row['exit']:>4} (expected {row['expected']:>4})  {mark}", flush=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"fault matrix on {name}, {stamp}: `python3 bench/gpu/faults_gpu.py`", "",
             "| cell | fault | exit | expected | on GPU after | result |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['cell']} | {r['fault']} | {r['exit']} | {r['expected']} | {r['on_gpu_after_s']} s | "
                     + ("ok" if not r["problems"] else "; ".join(r["problems"])) + " |")
    (out / "faults_gpu.md").write_text("\n".join(lines) + "\n")
    (out / "faults_gpu.json").write_text(json.dumps({"device": name, "date": stamp, "rows": rows}, indent=2))
    print("\n".join(lines))
    return 0 if all(not r["problems"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
