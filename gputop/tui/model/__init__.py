"""What the TUI shows and acts on, without Textual: the telemetry source and its sampler, the GPUs shown
(their static facts, positions, peaks), the GPU selected, the workloads and their runs, where runs go and
which run the results show, and (``gputop --tui --run`` / ``--watch``) the command followed: the process the
verdict diagnoses, its processes tagged, the GPU it shows up on selected.

The pages and widgets read it; whatever changes it goes through its methods (``use_source``, ``select_gpu``,
``set_device``, ``show_run``, ...), and each change announces itself to the observers (``observe``) with one of
the ``CHANGES`` names. Observers are called at once, on the thread that made the change (the app's: keys,
page events, the tour), so that no frame can draw a new source with the old source's charts; what crosses
threads or widgets travels as Textual messages (gputop/tui/messages.py). The live verdicts of its GPUs (``live``,
:class:`gputop.analysis.live.LiveNode`) are judged on the sampler's thread; the pages read their snapshot.

This package is the TUI's model room, under the results view, the pages and the app (tests/test_architecture.py
holds the order): ``runs`` (the workload runs: the runner's side), ``tour`` (where ``--tour`` is) and ``view`` (what
the screen shows, as plain data) beside the model itself; none of it imports Textual, nor anything above it.
"""

from __future__ import annotations

from collections.abc import Callable

from gputop.analysis.comms import latest_processes
from gputop.analysis.live import LiveNode, node_job_pids, node_pids
from gputop.analysis.rank_stacks import view_lines
from gputop.telemetry.sampler import MAX_RATE_HZ, MIN_RATE_HZ, Sampler
from gputop.tui.config import TuiConfig
from gputop.tui.model import view
from gputop.tui.model.runs import RunController, load_registry, no_live_gpu, with_recordings

# What an observer hears: another source (its GPUs, sampler), another GPU selected, another device for runs,
# another run shown, the workloads loaded.
SOURCE, GPU, DEVICE, RUN, SPECS = "source", "gpu", "device", "run", "specs"
CHANGES = (SOURCE, GPU, DEVICE, RUN, SPECS)
RATES = (0.5, 1.0, 2.0, 4.0, 5.0, 10.0, 20.0, 50.0)  # the sampling rates + and - step through
TAG_RUN, TAG_WATCH = "◀ command", "◀ watched"  # the process table's tags of a command's processes


class TuiModel:
    """The state the pages share. ``config``: the TUI's options (gputop/tui/config.py)."""

    def __init__(self, config: TuiConfig):
        self.config = config
        self._observers: list[Callable[[str], None]] = []
        self.command = config.command  # gputop --tui --run / --watch: the command's Session, the process diagnosed
        if self.command is not None:  # its Monitor samples (started with it); the app draws from that sampler
            config.sampler, config.start_sampler = self.command.monitor.sampler, False
        self.source = config.source
        self.sampler = config.sampler or Sampler(self.source, rate_hz=config.rate_hz)
        all_static = self.source.static()
        self.positions = config.gpus if config.gpus is not None else list(range(len(all_static)))
        self.peaks = [view.peaks_for(all_static[p]) for p in self.positions]  # (their notes: where facts came from)
        self.statics = view.shown_statics([all_static[p] for p in self.positions])
        self.na_reasons = self.source.na_reasons  # why fields are n/a (live: fills as NVML fails)
        self.sticky = view.Sticky()
        self.selected = 0  # index into statics
        self.gpu_picked = False  # by g / G, or (a command) the GPU it showed up on: not picked for the user again
        self.home_source = None  # the session's own source while the monitor follows a recording
        self.controller = RunController(self.sampler, nvml=self.source.nvml)
        self.no_gpu = no_live_gpu(self.source, self.statics, config.na_reason)  # why runs stay on the CPU
        self.device = "cpu" if self.no_gpu else config.device  # where workloads run: "cuda" or "cpu"
        self.shown_run: int | None = None  # index into controller.runs; None: the latest
        self.tour = None  # gputop --tour: where the tour is (n steps to the next stop)
        if config.tour:
            from gputop.tui.model.tour import Tour

            self.tour = Tour()
        # the workloads are loaded when first needed (the workloads page, the tour): loading runs every
        # workload module, CPU the monitor alone never needs
        self.specs, self.spec_errors = (config.specs, config.spec_errors) if config.specs is not None else ([], [])
        self.specs_loaded = config.specs is not None
        if self.specs_loaded:
            self._add_recordings()
        self.stacks = self._stack_reader()  # the ranks' stacks: read while a GPU is stalled, and on request (k)
        self.live = self._live_node()  # last: its listener asks watched_pid() (the controller) from the next tick

    # -- observers ---------------------------------------------------------------------------------
    def observe(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(change)`` after each change (``change``: one of ``CHANGES``)."""
        self._observers.append(fn)

    def _announce(self, change: str) -> None:
        for fn in list(self._observers):
            fn(change)

    # -- the source --------------------------------------------------------------------------------
    def use_source(self, source) -> None:
        """Draw from ``source`` from now on: a new sampler, its GPUs, their peaks (the observers then make
        the charts it needs)."""
        old = self.sampler
        old.stop()
        if old.source is not self.home_source and old.source is not source:
            old.source.close()
        self.source = source
        self.sampler = Sampler(source, rate_hz=old.rate_hz)
        self.controller.sampler = self.sampler
        self.peaks = [view.peaks_for(st) for st in source.static()]
        self.statics = view.shown_statics(source.static())
        self.positions = list(range(len(self.statics)))
        self.na_reasons = source.na_reasons
        self.selected = 0
        self.sticky = view.Sticky()
        self.sampler.listeners.append(self.sticky.observe)
        self.stacks = self._stack_reader()
        self.live = self._live_node()
        if self.config.start_sampler:
            self.sampler.start()
        self._announce(SOURCE)

    def follow_recording(self, state) -> bool:
        """Where there is no live GPU, the monitor follows a replayed recorded run: while ``state`` (its run)
        plays, the source is the recording's own trace (its GPU, its charts, its phase marks), started with the
        run so the two stay in step (True). With a live GPU the monitor keeps watching the real GPU (False)."""
        path = getattr(state.run, "path", None)
        if not self.no_gpu or not path:
            return False
        from gputop.telemetry.trace import ReplaySource

        if self.home_source is None:
            self.home_source = self.source
        self.use_source(ReplaySource(path, speed=self.config.run_speed))
        return True

    def _live_node(self) -> LiveNode:
        """The live verdicts of the GPUs shown, fed by the sampler's thread at each tick (the selected GPU judged
        every LIVE_EVERY_S, the strip's others every LIVE_STRIP_EVERY_S); the monitor page reads its snapshot. A
        command's (--tui --run / --watch): its monitor's own live node, which keeps the run's culprit."""
        own = getattr(self.command.monitor, "live", None) if self.command is not None else None
        if own is not None and own.positions == self.positions:
            own.selected = self.selected
            return own
        return LiveNode(self.positions, self.statics, self.peaks, watched_pid=self.watched_pid,
                        selected=self.selected, stacks=self.stacks).attach(self.sampler)

    def _stack_reader(self):
        """Who reads the ranks' stacks (gputop/session/stacks.py): a command's monitor's reader; a replay's recorded
        reads; py-spy on this machine's processes for a live source; none for a remote source (dcgm-exporter)."""
        from gputop.session.stacks import RecordedStacks, StackWatch

        if self.command is not None:
            return getattr(self.command.monitor, "stacks", None)
        if self.source.kind == "replay":
            return RecordedStacks(self.source) if getattr(self.source, "extra", None) else None
        return StackWatch() if self.source.kind == "live" else None

    # -- the ranks' stacks (the stack view, k) ----------------------------------------------------------------------
    def ask_stacks(self) -> str:
        """Read the stacks of the processes on the GPUs shown now (a person asked); what happens, in words."""
        if self.stacks is None:
            return ("this source's processes are another machine's: no stack to read" if self.source.kind != "replay"
                    else "this trace holds no stacks (recorded without a stall, or by an older gputop)")
        if getattr(self.stacks, "closed", False):
            return "the command has ended: its ranks are gone (the stacks read while it ran are shown)"
        if self.source.kind == "replay" and self.command is None:
            return "a recording: the stacks read while it ran, during its stalls (none up to this point)"
        pids = [p for ps in node_pids(self.live, self.sampler.window(60.0)).values() for p in ps]
        if not pids:
            return "no process on the GPUs shown: no stack to read"
        if self.stacks.ask(pids, force=True):
            return f"reading the stacks of {len(pids)} process(es)"
        return "a read is under way"

    def stack_view(self) -> list[str]:
        """Every rank's stack, grouped by place, the culprit first (gputop/analysis/rank_stacks.py), each job of the
        node apart; [] before any read."""
        if self.stacks is None:
            return []
        latest = self.sampler.latest()
        read = self.stacks.latest(latest["t"] if latest else None)
        snap = self.live.snapshot()
        classes = {name: (g.verdict.cls if g.verdict is not None else None)
                   for name, g in zip(self.live.names, snap.gpus)}
        jobs = node_job_pids(self.live, self.sampler.window(60.0))
        if len(jobs) <= 1:
            return view_lines(jobs[0] if jobs else {}, classes, read)
        out: list[str] = []  # two jobs or more on the node: each judged on its own ranks
        for n, job in enumerate(jobs, 1):
            lines = view_lines(job, classes, read)
            if lines:
                out += [f"job {n} of {len(jobs)} (GPU {', '.join(str(g) for g in sorted(job))})", *lines, ""]
        return out[:-1]

    def describe(self) -> str:
        """What the monitor shows from the source, in words ("the demo", "this machine's host only", ...)."""
        source = self.source
        if source.kind == "replay":
            return "the demo" if source.loop else f"the replay of {source.label or 'a trace'}"
        if source.kind == "live":
            return "this machine's GPUs" if self.statics else "this machine's host only (no GPU)"
        return f"the {source.kind} GPUs"

    def go_home(self) -> None:
        """Back to the session's own source (a live run starts)."""
        if self.home_source is None:
            return
        source, self.home_source = self.home_source, None
        self.use_source(source)

    def close(self) -> None:
        """Stop the runs and the sampler; close the sources."""
        self.controller.stop_all(timeout=5.0)
        self.sampler.stop()
        for source in {id(s): s for s in (self.source, self.home_source) if s is not None}.values():
            source.close()

    # -- sampling ----------------------------------------------------------------------------------
    def toggle_pause(self) -> None:
        self.sampler.paused = not self.sampler.paused

    def step_rate(self, step: int) -> bool:
        """The next sampling rate up (``step`` > 0) or down; False for a replay (it plays at its own rate)."""
        if self.source.kind == "replay":
            return False
        cur = self.sampler.rate_hz
        if step > 0:
            nxt = next((r for r in RATES if r > cur + 1e-9), MAX_RATE_HZ)
        else:
            nxt = next((r for r in reversed(RATES) if r < cur - 1e-9), MIN_RATE_HZ)
        self.sampler.set_rate(nxt)
        return True

    def sample(self, tick: dict | None, i: int) -> dict | None:
        """GPU ``i``'s sample in ``tick``, its sticky fields filled (None without one)."""
        if tick is None:
            return None
        gpus = tick["gpus"]
        pos = self.positions[i]
        return self.sticky.apply(pos, gpus[pos]) if pos < len(gpus) else None

    def header_parts(self, tick: dict | None) -> list[str]:
        """The header: host, GPUs, driver, CUDA, rate, mode, and what the session adds (read-only, phase)."""
        host = self.source.hostname if self.home_source is not None else self.config.hostname  # a followed replay's
        parts = view.source_header(self.source, self.statics, self.sampler.rate_hz, host, self.sampler.paused)
        if self.config.read_only:
            parts.append("read-only")
        if tick and tick.get("phase"):
            parts.append(f"phase: {tick['phase']}")
        if self.command is not None and self.command.doc is not None:
            parts.append("sampling stopped")
        return parts

    # -- the GPU -----------------------------------------------------------------------------------
    def select_gpu(self, step: int) -> bool:
        """The next (previous) GPU, the user's pick (g / G); False with one GPU or none."""
        self.gpu_picked = True  # a command showing up on another GPU later does not undo it
        if len(self.statics) <= 1:
            return False
        self.selected = (self.selected + step) % len(self.statics)
        self.live.select(self.selected)
        self._announce(GPU)
        return True

    def select_position(self, pos: int) -> bool:
        """Select the GPU at position ``pos`` of the source (False: it is not shown)."""
        if pos not in self.positions:
            return False
        self.selected = self.positions.index(pos)
        self.live.select(self.selected)
        self._announce(GPU)
        return True

    def follow_command_gpu(self) -> None:
        """gputop --tui --run / --watch: once the command shows up on a GPU, select that GPU (once, and not once the
        user picked one with g / G)."""
        if self.command is None or self.gpu_picked:
            return
        first, _ = self.command.monitor.finder.result()
        if first:
            self.gpu_picked = True
            self.select_position(min(first))  # the monitor judges that GPU afresh

    def pids_on_selected(self) -> set[int]:
        """The pids NVML listed on the selected GPU in the last minute of ticks (a rank that has exited since is
        still there: its profiler window is still its)."""
        if not self.statics:
            return set()
        pos = self.positions[self.selected]
        procs = latest_processes(self.sampler.window(60.0), [pos], nonempty=True).get(pos) or []
        return {p.get("pid") for p in procs}

    def nvml_index(self) -> int | None:
        """The NVML index of the selected GPU (None without a GPU)."""
        if not self.statics:
            return None
        return self.statics[self.selected].get("index")

    # -- the workloads -----------------------------------------------------------------------------
    def load_specs(self) -> None:
        """The workloads (the registry's, and the recorded runs to offer), on first need."""
        if self.specs_loaded:
            return
        self.specs_loaded = True
        self.specs, self.spec_errors = load_registry()
        self._add_recordings()
        self._announce(SPECS)

    def _add_recordings(self) -> None:
        from gputop.runner.recording import shipped as shipped_runs

        shipped = shipped_runs() if self.config.specs is None and self.no_gpu else []  # the GPU runs gputop ships
        if self.config.recordings or shipped:
            self.specs, errors = with_recordings(self.specs, list(self.config.recordings) + shipped)
            self.spec_errors = list(self.spec_errors) + errors

    def set_device(self, device: str) -> None:
        """Where workloads run from now on: "cuda" or "cpu" (the CPU only, without a live GPU)."""
        device = "cpu" if self.no_gpu or not self.statics else device
        changed = device != self.device
        self.device = device
        if changed:
            self._announce(DEVICE)

    def where(self) -> str:
        """Where a run starts now: "CPU" or "GPU n"."""
        return "CPU" if self.device == "cpu" else f"GPU {self.nvml_index()}"

    def refusal(self, what: str) -> str | None:
        """A browser's read-only view (gputop --serve without --serve-control): why ``what`` (start, stop or
        save a run) is refused; None where it is allowed."""
        if not self.config.read_only:
            return None
        return f"read-only view: cannot {what} here (gputop --serve --serve-control allows it)"

    # -- the runs ----------------------------------------------------------------------------------
    def show_run(self, i: int | None) -> None:
        """Show run ``i`` of the controller's runs in the results (None: the latest, and each new one)."""
        self.shown_run = i
        self._announce(RUN)

    def step_run(self, step: int) -> None:
        """An older (``step`` < 0) or newer run in the results."""
        runs = self.controller.runs
        if runs:
            cur = len(runs) - 1 if self.shown_run is None else self.shown_run
            self.show_run(max(0, min(len(runs) - 1, cur + step)))

    def shown_state(self):
        """The run the results show (the latest unless another was picked); None before any run."""
        runs = self.controller.runs
        if not runs:
            return None
        i = len(runs) - 1 if self.shown_run is None else max(0, min(self.shown_run, len(runs) - 1))
        return runs[i]

    def watched_pid(self) -> int | None:
        """The process the verdict diagnoses as the feeding one: the command's (gputop --tui --run / --watch), else a
        running workload's."""
        if self.command is not None:
            return self.command.pid
        own = [r.run.pid for r in self.controller.active if getattr(r.run, "pid", None) is not None]
        return own[0] if own else None

    def tagged_pids(self) -> dict[int, str]:
        """Other processes to tag in the process table ({pid: tag}): the command's process tree the monitor has seen
        (gputop --tui --run: the command and its children; --watch: the pid and its)."""
        if self.command is None:
            return {}
        finder = self.command.monitor.finder
        with finder.lock:
            pids = set(finder.known)
        tag = TAG_RUN if self.command.mode == "run" else TAG_WATCH
        return {p: tag for p in pids}
