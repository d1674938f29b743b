"""The cluster page's help (``?``): its keys, and how to read its rows. The monitor's help screen, another text."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from gputop.tui.help import HelpScreen

HELP = """\
[b]gputop cluster keys[/b]  (gputop --source prometheus=URL)
  Up/Down, PgUp/PgDn, Home/End   move the cursor over the GPUs
  Enter      the GPU's detail: its charts and verdict over the last
             15 min (query_range); Escape goes back, r reads again
  j / J      filter by job: the next / previous job (then all)
  n / N      filter by node: the next / previous node (then all)
  c / C      filter by class: the next / previous class (then all)
  x          all GPUs again (no filter)
  g          group by job / by node
  r          read Prometheus now (else every 5 s)
  ?          this help;  q quits

[b]reading the page[/b]
  rows       one per GPU, the most wasted GPU-time first (waste:
             1 - SM activity now; where SM activity is not exported,
             all of it in a waiting class, none in a working one)
  class      the bottleneck: gputop --export's verdict (by: export),
             or judged here from dcgm-exporter's series (by: gputop)
  conf       the verdict's confidence (0-1)
  SM, DRAM, tens   SM activity, DRAM bandwidth, tensor pipes now
  mem GiB    framebuffer used / total
  headings   a job's (or node's) GPUs, their mean waste, and the
             job's GPU-hours by class over --range
  GPU-hours  each job's GPU-hours by class over --range (default
             1h), the most wasted first, read every minute
  stale N s  Prometheus did not answer for N s: the rows are the
             last read; the page recovers when it answers again
  At 80 columns the columns that do not fit drop (model, by,
  memory, confidence, tensor); 160 columns show them all.

Up/Down/PgUp/PgDn scroll; Escape, q or ? close."""


class ClusterHelp(HelpScreen):
    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(HELP)
