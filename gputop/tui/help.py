"""The help screen (``?``): the keys, and how to read the numbers."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]gputop keys[/b]
  1 / 2        monitor page / workloads page
  g / G        next / previous GPU (the strip on top lists them all)
  p            pause sampling (the screen freezes)
  + / -        sampling rate up / down
  r / Enter    run the selected workload with the parameters in the form
  c            cancel the running workload (a second c kills it)
  d            run workloads on the CPU / the GPU
  [ / ]        older / newer run in the results
  s            save the shown run as JSON (in the current folder)
  ?            this help;  q quits (stopping a running workload cleanly)

[b]reading the numbers[/b]
  SM activity   fraction of SMs busy (GPM, Hopper+): how much of the GPU works
  SM occupancy  resident warps vs the maximum: latency hiding
  DRAM bandwidth  share of the peak memory bandwidth in use
  Tensor active   tensor-core pipes busy: is the math on tensor cores?
  Kernel duty   NVML "utilization": the share of time ANY kernel ran. 100% can
                mean one tiny kernel on one SM - a duty cycle, not throughput.
  Clock events  why clocks are below max (power cap, thermal, idle...)

Press Escape, q or ? to close."""


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Static { width: auto; max-width: 90; height: auto; max-height: 100%; padding: 1 2;
                          border: round $primary; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        yield Static(HELP)
