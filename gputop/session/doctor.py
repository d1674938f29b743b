"""``gputop --doctor`` run: the passive reads, then a load on every GPU at once, watched from here.

:class:`DoctorRun` is a :class:`gputop.runner.run.Run`. On ``start()`` it reads each GPU's health
(:func:`gputop.telemetry.health.read_health`) and the XIDs in the kernel log. Unless passive, it then starts, through
the one supervisor (:class:`gputop.runner.child.Child`: a hang is bounded by a timeout, nothing outlives the run):

* one :mod:`gputop.measure.health_load` child per GPU (its ``cuda:0`` that GPU, pinned to the GPU's NUMA node's
  CPUs), all at once, so that 8 GPUs take about the time of one; the host copies are taken one GPU at a time (a
  child says ``pcie-wait``, this run answers on its stdin in turn);
* one :mod:`gputop.measure.p2p_load` child seeing every loaded GPU: it creates its contexts while the others work,
  and copies between each pair once they are all done;
* a sampler (NVML, no GPM) over the GPUs, whose ticks give the clocks, reasons, power and temperature of each
  child's phases, with each GPU's PCIe link read on every tick (the link under load).

GPUs in MIG mode, held by another process or lost are not loaded (said in their document). ``stop()`` stops every
child (SIGINT, SIGKILL after the grace period). ``node()`` is what :func:`gputop.analysis.doctor.judge` takes; the
document is :mod:`gputop.session.doctor_document`'s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from gputop import paths
from gputop.analysis.doctor import link_stats, phase_stats
from gputop.analysis.peaks import compute_peaks
from gputop.measure.health_load import FULL, QUICK
from gputop.runner.child import GRACE_S, Child
from gputop.runner.events import RunEvents
from gputop.telemetry.devices import child_env_all, child_env_for, multicast_off
from gputop.telemetry.health import read_cpu_affinity, read_health, read_kernel_xids, read_pcie_link
from gputop.telemetry.static import device_count, read_link, read_static, read_uuid

STARTUP_S = 90.0  # a child's allowance for python, torch, CuPy, its CUDA context and the kernels' compilation
TURN_S = 5.0  # each GPU's turn at the host copies, for the timeout
TURN_LIMIT_S = 30.0  # a turn held longer: the copies hung; that load is stopped and the next GPU goes on
P2P_S = 60.0  # the pair copies, once started
SAMPLE_HZ = 10.0


@dataclass
class DoctorOptions:
    """``gpus``: NVML indices (empty: all); ``mode``: full, quick or passive; ``load_cmd`` / ``p2p_cmd``: the
    children's command lines (default: the two measure modules; a test gives its own); ``kernel_log`` and
    ``uptime_s``: the kernel log's records to read instead of /dev/kmsg, and the time since boot (a test's)."""

    gpus: tuple[int, ...] = ()
    mode: str = "full"
    grace_s: float = GRACE_S
    load_cmd: list[str] | None = None
    p2p_cmd: list[str] | None = None
    sustained_s: float | None = None
    extra_env: dict = field(default_factory=dict)
    kernel_log: list[str] | None = None
    uptime_s: float | None = None


class _Load:
    """One child and what it said."""

    def __init__(self, pos: int, index: int, child: Child, events: RunEvents):
        self.pos, self.index, self.child, self.events = pos, index, child, events
        self.rc: int | None = None
        self.turn_timed_out = False
        self.readers: list[threading.Thread] = []

    def send(self, line: str) -> None:
        try:
            self.child.proc.stdin.write(line)
            self.child.proc.stdin.flush()
        except (OSError, ValueError, AttributeError):
            pass

    def close_stdin(self) -> None:
        try:
            self.child.proc.stdin.close()
        except (OSError, ValueError, AttributeError):
            pass


class DoctorRun:
    """One doctor run over ``options.gpus`` of ``nvml``'s machine (a :class:`gputop.runner.run.Run`)."""

    def __init__(self, nvml, options: DoctorOptions):
        self.nvml, self.options = nvml, options
        self.stopping = False
        self.signum: int | None = None
        self.indices: list[int] = []
        self.gpus: list[dict] = []  # per GPU: index, name, uuid, static, peaks, health, xids, active, ...
        self.xid_log: dict = {}
        self.pairs: list[dict] = []
        self.loads: list[_Load] = []
        self.p2p: _Load | None = None
        self.missing: list[str] = []  # a child said a dependency is missing
        self.ticks: list[dict] = []
        self.links: list[tuple] = []  # (t, position, gen, width)
        self.t0 = self.t_end = None
        self.sampler = None
        self._lock = threading.Lock()
        self._turns: list[_Load] = []
        self._holder: _Load | None = None
        self._granted_at = 0.0
        self._done = threading.Event()

    # -- start ---------------------------------------------------------------------------------------
    def start(self) -> "DoctorRun":
        self.t0 = time.monotonic()
        n = device_count(self.nvml)
        self.indices = list(self.options.gpus) or list(range(n))
        for i in self.indices:
            static = read_static(self.nvml, i)
            self.gpus.append({"index": i, "name": static.get("name"), "uuid": static.get("uuid"), "static": static,
                              "peaks": compute_peaks(static), "health": read_health(self.nvml, i), "active": None})
        self.xid_log = read_kernel_xids([g["health"].get("pci_bus_id") for g in self.gpus], self.options.kernel_log,
                                        self.options.uptime_s)
        for pos, g in enumerate(self.gpus):
            g["xids"] = self.xid_log["by_gpu"].get(pos, []) if self.xid_log.get("readable") else None
        if self.options.mode == "passive" or self.stopping:
            self._finish()
            return self
        self._start_loads()
        threading.Thread(target=self._orchestrate, daemon=True, name="gputop-doctor").start()
        return self

    def _skip_why(self, g: dict) -> str | None:
        h = g["health"]
        if h.get("lost"):
            return "the GPU is lost"
        if h.get("mig_enabled"):
            return "MIG mode is on (the load needs the whole GPU)"
        if h.get("processes"):
            return f"{len(h['processes'])} other process(es) hold the GPU"
        return None

    def _env(self, env: dict) -> dict:
        multicast_off(env)
        root = str(paths.package_root())
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.options.extra_env)
        return env

    def _child(self, pos: int, index: int, argv: list[str], env: dict, timeout: float) -> _Load:
        events = RunEvents()
        child = Child(argv, interrupt="leader", grace_s=self.options.grace_s, timeout=timeout, stdin=subprocess.PIPE,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True, encoding="utf-8",
                      errors="replace", bufsize=1)
        load = _Load(pos, index, child, events)
        events.on_event = lambda ev, load=load: self._on_event(load, ev)
        child.on_exit = lambda rc, load=load: self._on_exit(load, rc)
        child.start()
        for stream, fn in ((child.proc.stdout, events.read_stdout), (child.proc.stderr, events.read_stderr)):
            t = threading.Thread(target=fn, args=(stream,), daemon=True, name=f"gputop-doctor-{index}")
            t.start()
            load.readers.append(t)
        return load

    def _start_loads(self) -> None:
        from gputop.telemetry.live import LiveSource
        from gputop.telemetry.sampler import Sampler

        quick = self.options.mode == "quick"
        sustained = self.options.sustained_s if self.options.sustained_s is not None else (
            QUICK if quick else FULL)["sustained_s"]
        loadable = [g for g in self.gpus if not self._set_skip(g)]
        timeout = STARTUP_S + sustained + TURN_S * len(loadable) + TURN_LIMIT_S
        uuids = [read_uuid(self.nvml, i) for i in range(device_count(self.nvml))]
        source = LiveSource(self.nvml, gpus=self.indices, gpm=False, process_every=10 ** 9)
        self.sampler = Sampler(source, rate_hz=SAMPLE_HZ, history_s=timeout + P2P_S + 60)
        self.sampler.listeners.append(self._on_tick)
        self.sampler.start()
        for g in loadable:
            if self.stopping:
                break
            pos = self.gpus.index(g)
            argv = list(self.options.load_cmd or [sys.executable, "-u", "-m", "gputop.measure.health_load"])
            argv += ["--events", "--turn"] + (["--quick"] if quick else [])
            if self.options.sustained_s is not None:
                argv += ["--sustained", f"{self.options.sustained_s:g}"]
            cpus = read_cpu_affinity(self.nvml, g["index"])
            if cpus:
                argv += ["--cpus", ",".join(map(str, cpus))]
            try:
                self.loads.append(self._child(pos, g["index"], argv, self._env(child_env_for(g["index"], uuids)),
                                              timeout))
            except OSError as exc:
                g["active"] = {"figures": {}, "error": f"the load could not start: {exc}", "skipped": None}
        if len(self.loads) >= 2 and not self.stopping:
            env = child_env_all([uuids[ld.index] for ld in self.loads])
            argv = list(self.options.p2p_cmd or [sys.executable, "-u", "-m", "gputop.measure.p2p_load"])
            try:
                self.p2p = self._child(-1, -1, argv + ["--events", "--wait"], self._env(env), timeout + P2P_S)
            except OSError as exc:
                self.pairs = [{"gpus": [a.index, b.index], "bytes_per_s": None, "error": f"cannot start: {exc}"}
                              for a in self.loads for b in self.loads if a is not b]

    def _set_skip(self, g: dict) -> bool:
        why = self._skip_why(g)
        if why:
            g["active"] = {"figures": {}, "error": None, "skipped": why}
        return bool(why)

    # -- while it runs --------------------------------------------------------------------------------
    def _on_tick(self, tick: dict) -> None:
        self.ticks.append(tick)
        for pos, i in enumerate(self.indices):
            gen, width = read_pcie_link(self.nvml, i)
            self.links.append((tick["t"], pos, gen, width))

    def _on_event(self, load: _Load, ev: dict) -> None:
        if ev.get("event") == "error" and ev.get("kind") == "missing_dependency":
            self.missing.append(str(ev.get("message")))
        if ev.get("event") != "phase" or load is self.p2p:
            return
        with self._lock:
            if ev.get("name") == "pcie-wait":
                self._turns.append(load)
            elif load is self._holder and ev.get("name") != "pcie":
                self._holder = None
        self._grant()

    def _on_exit(self, load: _Load, rc: int) -> None:
        load.rc = rc
        with self._lock:
            if load is self._holder:
                self._holder = None
            if load in self._turns:
                self._turns.remove(load)
        self._grant()

    def _grant(self) -> None:
        with self._lock:
            if self._holder is not None or not self._turns or self.stopping:
                return
            self._holder = self._turns.pop(0)
            self._granted_at = time.monotonic()
            holder = self._holder
        holder.send("go\n")

    def _check_turn(self) -> None:
        """Stop a load that has held the host copies' turn for more than TURN_LIMIT_S (its copies hung)."""
        with self._lock:
            holder = self._holder
            late = holder is not None and time.monotonic() - self._granted_at > TURN_LIMIT_S
        if late and not holder.turn_timed_out:
            holder.turn_timed_out = True
            holder.child.stop()

    def _orchestrate(self) -> None:
        try:
            while not all(ld.child.done for ld in self.loads):
                self._check_turn()
                time.sleep(0.1)
            for ld in self.loads:
                for t in ld.readers:
                    t.join(5.0)
            if self.p2p is not None:
                if not self.stopping:
                    self.p2p.send("go\n")
                    self.p2p.child.timeout = time.monotonic() - self.p2p.child.t_start + P2P_S
                self.p2p.close_stdin()
                self.p2p.child.wait()
                for t in self.p2p.readers:
                    t.join(5.0)
        finally:
            self._finish()

    # -- the end --------------------------------------------------------------------------------------
    def _finish(self) -> None:
        try:
            if self.sampler is not None:
                self.sampler.stop()
                self.sampler.source.close()
            self.t_end = time.monotonic()
            for ld in self.loads:
                self.gpus[ld.pos]["active"] = self._active(ld)
            if self.p2p is not None:
                self.pairs = self._pairs(self.p2p)
            if self.loads:
                for g in self.gpus:
                    g["health_after"] = read_health(self.nvml, g["index"])
                    g["window_s"] = self.t_end - self.t0
                for p in self.pairs:
                    p.update(self._link(*p["gpus"]))
        finally:
            self._done.set()

    def _failure(self, ld: _Load) -> str | None:
        """Why a child did not finish, in words (None: it did)."""
        ev, child = ld.events, ld.child
        if ev.errors:
            e = ev.errors[0]
            return e["message"] + (f" ({e['detail'][-200:]})" if e.get("detail") else "")
        if ld.turn_timed_out:
            return f"the host copies did not end within {TURN_LIMIT_S:.0f} s: the load hung (stopped)"
        if child.timed_out:
            return f"no answer within {child.timeout:.0f} s: the load hung (stopped)"
        if ld.rc not in (0, None) and not self.stopping:
            tail = " | ".join(list(ev.stderr_tail)[-3:])
            how = f"killed by signal {-ld.rc}" if ld.rc < 0 else f"exited with code {ld.rc}"
            return f"the load {how}" + (f": {tail[-300:]}" if tail else "")
        bad = [w for w in ev.warnings if w.get("code") == "wrong_result"]
        return bad[0]["message"] if bad else None

    def _active(self, ld: _Load) -> dict:
        ev = ld.events.copy()
        r = ev["results"]
        phases = {p["name"]: p for p in ev["phases"]}
        figures = {"dram_bytes_per_s": (r.get("dram") or {}).get("bytes_per_s"),
                   "fp32_flops": (r.get("fp32") or {}).get("flops_per_s"),
                   "bf16_flops": (r.get("bf16") or {}).get("flops_per_s"),
                   "bf16_sustained_flops": (r.get("sustained") or {}).get("bf16_sustained_flops"),
                   "h2d_bytes_per_s": (r.get("pcie") or {}).get("h2d_bytes_per_s"),
                   "d2h_bytes_per_s": (r.get("pcie") or {}).get("d2h_bytes_per_s")}
        load: dict = {}
        sus = phases.get("sustained")
        if sus and sus.get("t_end"):
            load["sustained"] = phase_stats(self.ticks, ld.pos, sus["t_start"], sus["t_end"], tail=0.5)
            figures["sm_clock_loaded_mhz"] = load["sustained"]["sm_clock_mhz"]
        pcie = phases.get("pcie")
        if pcie and pcie.get("t_end"):
            load["pcie"] = link_stats(self.links, ld.pos, pcie["t_start"], pcie["t_end"])
        error = None if self.stopping and ld.rc in (130, -2) else self._failure(ld)
        return {"figures": {k: v for k, v in figures.items() if v is not None}, "details": r, "load": load,
                "phases": [{"name": p["name"], "s": round((p["t_end"] or self.t_end) - p["t_start"], 2)}
                           for p in ev["phases"]],
                "error": error, "skipped": None, "exit_code": ld.rc}

    def _pairs(self, ld: _Load) -> list[dict]:
        got = ld.events.copy()["results"].get("pairs") or []
        cuda_to_nvml = [x.index for x in self.loads]
        out = [{**p, "gpus": [cuda_to_nvml[p["gpus"][0]], cuda_to_nvml[p["gpus"][1]]]} for p in got
               if max(p["gpus"]) < len(cuda_to_nvml)]
        if not out and not self.stopping:
            why = self._failure(ld) or "no pair was measured"
            out = [{"gpus": [a.index, b.index], "bytes_per_s": None, "error": why}
                   for a in self.loads for b in self.loads if a is not b]
        return out

    def _link(self, a: int, b: int) -> dict:
        from gputop.analysis.links import link_peak

        facts = read_link(self.nvml, a, b)
        peak = link_peak(facts) or {}
        gbps = peak.get("peak_gbps")
        return {"kind": facts.get("kind"), "peak_bytes_per_s": gbps * 1e9 if gbps else None,
                "peak_source": peak.get("source")}

    # -- the Run protocol ---------------------------------------------------------------------------
    def stop(self, signum: int | None = None) -> None:
        if signum is not None and self.signum is None:
            self.signum = signum
        again = self.stopping
        self.stopping = True
        for ld in self.loads + ([self.p2p] if self.p2p else []):
            if again:
                ld.child.kill()
            else:
                ld.child.stop()
                ld.close_stdin()

    def poll(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def node(self) -> dict:
        """What :func:`gputop.analysis.doctor.judge` takes."""
        return {"gpus": self.gpus, "pairs": self.pairs,
                "xid_log": {k: self.xid_log.get(k) for k in ("readable", "why")}}

    @property
    def wall_s(self) -> float | None:
        return None if self.t0 is None else (self.t_end or time.monotonic()) - self.t0
