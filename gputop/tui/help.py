"""The help screen (``?``): the keys, and how to read the numbers. It scrolls where it does not fit
(80x24), and its lines wrap to the width."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]gputop keys[/b]
  1 / 2      monitor page / workloads page
  g / G      next / previous GPU (the strip on top lists them all)
  p          pause sampling (the screen freezes)
  + / -      sampling rate up / down
  r / Enter  run the selected workload with the parameters in the form
  c          cancel the running workload (a second c kills it)
  d          run workloads on the CPU / the GPU
  [ / ]      older / newer run in the results
  s          save the shown run as JSON (in the current folder)
  v          the shown verdict whole, in the plot's place ("… (v)")
  n          gputop --tour: the next stop of the tour
  w          a profiler window now, of the selected GPU's process (one
             started prepared: gputop --profile-env) or of --run's command
  a          --tui --run --profile: the latest window, in the pages' place
  k          every rank's Python stack (read now), the culprit of a stall first
  ?          this help;  q quits (stopping a running workload cleanly)

[b]reading the numbers[/b]
  SM activity     SMs busy (GPM, Hopper+): how much of the GPU works
  SM occupancy    resident warps vs the maximum: latency hiding
  DRAM bandwidth  share of the peak memory bandwidth in use
  Tensor active   tensor-core pipes busy: is the math on tensor cores?
  Kernel duty     NVML "utilization": the share of time ANY kernel ran;
                  100% can be one tiny kernel on one SM (a duty cycle,
                  not throughput)
  Clock events    why clocks are below max (power cap, thermal, idle...)
  Charts          the last 60 s; "scale 0-100%" is the chart's range,
                  not a value

Up/Down/PgUp/PgDn scroll; Escape, q or ? close."""


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 100%; max-width: 90; height: auto; max-height: 100%;
                                  border: round $primary; background: $surface;
                                  scrollbar-size-vertical: 1; }
    HelpScreen Static { width: 100%; height: auto; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(HELP)

    def on_mount(self) -> None:
        self.query_one("#help").focus()  # the arrow keys scroll it
