"""The panels of the monitor page, each a ``Lines`` widget fed ready-made rows: the device panel, the verdict,
the process table. What they show is computed in ``gputop.tui.model.view`` (pure functions). (The header and the
GPU summary above every page are gputop/tui/header.py; a run's results, gputop/tui/results/.)"""

from __future__ import annotations

from rich.text import Text

from gputop.analysis.rank_stacks import culprit_place
from gputop.tui.model import view
from gputop.tui.widgets import charts
from gputop.tui.widgets.lines import Lines

LEVEL_STYLE = {"": "green", "peak": "bold cyan", "warn": "yellow", "hot": "bold red", "na": "dim"}


class DevicePanel(Lines):
    """Every metric of the selected GPU, with a bar against its peak."""

    LABEL_W = 15

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.data: tuple[dict, dict, dict | None, dict | None] | None = None
        self._shown = None  # (title, rows, bar width) last drawn

    def show(self, static: dict, peaks: dict, sample: dict | None, na_reasons: dict | None = None) -> None:
        self.data = (static, peaks, sample, na_reasons)
        self.rebuild(force=False)

    def rebuild(self, force: bool = True) -> None:
        if self.data is None:
            return
        static, peaks, sample, na_reasons = self.data
        width = max(20, self.wh[0] or 80)
        title = view.gpu_title(static)
        compact = self.app.has_class("-short")
        rows = view.device_rows(static, peaks, sample, na_reasons, compact) if sample is not None else None
        bar_w = max(0, min(24, width - self.LABEL_W - 36))
        key = (title, rows, bar_w, bool(sample and sample.get("lost")))
        if not force and key == self._shown:
            return
        self._shown = key
        lines = [Text(title, style="bold")]
        if rows is None:
            lines.append(Text("waiting for the first sample...", style="dim"))
            self.set_lines(lines)
            return
        if sample.get("lost"):
            lines.append(Text("GPU LOST: NVML says this GPU fell off the bus", style="bold red"))
        lw = self.LABEL_W
        for r in rows:  # (row, "", (label: bold), (bar: its level's colour), (value: its style)), no Text built
            label = f"{r.label:<{lw}}"
            bar = ""
            if bar_w >= 6:
                bar = (charts.hbar(r.fraction, bar_w) if r.fraction is not None else " " * bar_w) + " "
            style = "dim" if r.level == "na" else ("bold red" if r.level == "hot" and r.fraction is None else "")
            bar_style = LEVEL_STYLE[r.level] if r.fraction is not None else ""
            end = len(label) + len(bar)
            lines.append((label + bar + r.text, "", (0, len(label), "bold"),
                          (len(label), end - 1, bar_style) if bar and bar_style else None,
                          (end, end + len(r.text), style) if style else None))
        self.set_lines(lines)


class ProcessTable(Lines):
    """pid, user, name, GPU memory; gputop's own workload is tagged."""

    DEFAULT_CSS = "ProcessTable { height: auto; max-height: 10; }"

    _shown = None

    def show(self, procs: list[dict] | None, own_pids: set[int], host_line: str,
             tags: dict[int, str] | None = None) -> None:
        key = (procs, own_pids, host_line, tags)
        if key == self._shown:
            return
        self._shown = key
        lines = [Text(f"{'PID':>8}  {'USER':<12} {'NAME':<22} {'GPU MEM':>10}  ", style="bold reverse")]
        rows = view.process_rows(procs, own_pids, tags)
        if procs is None:
            lines.append(Text("  processes: n/a", style="dim"))
        elif not rows:
            lines.append(Text("  no processes on this GPU", style="dim"))
        for pid, user, name, mem, tag in rows:
            t = Text(f"{pid:>8}  {user[:12]:<12} {name[:22]:<22} {mem:>10}  ")
            if tag:
                t.append(tag, style="bold cyan")
            lines.append(t)
        lines.append(Text(host_line, style="dim"))
        self.set_lines(lines)


class VerdictPanel(Lines):
    """The bottleneck class, the window it judged, its evidence in numbers (that window's means, not the
    instantaneous bars above), who holds its job up (a stall's culprit, from the ranks' stacks), its advice (wrapped
    to the width, not cut)."""

    DEFAULT_CSS = "VerdictPanel { height: auto; }"
    SHORT_ADVICE_ROWS_MANY = 2  # 80x24 with several GPUs: the strip (up to 5 rows) and the summary line above
    MIN_ROWS = 2  # what a limit leaves it: the verdict's first row and one of the culprit's or the advice's

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.verdict = None
        self.words = ""
        self.shown = False
        self.max_rows: int | None = None  # a limit the page sets (80x24: the charts' rows first), else None
        self.natural_rows = 0  # the rows it would take without that limit

    def limit(self, rows: int | None) -> None:
        """At most ``rows`` rows (None: no limit beyond the compact ones): the advice gives up its rows first,
        then the evidence; a part cut short ends in "…"."""
        rows = None if rows is None or rows >= self.natural_rows else max(self.MIN_ROWS, rows)
        if rows != self.max_rows:
            self.max_rows = rows
            self.rebuild()

    def show(self, verdict, words: str = "") -> None:
        """``words``: which window the verdict judged ('last 5.1 s')."""
        if self.shown and verdict == self.verdict and words == self.words:
            return
        self.verdict, self.words, self.shown = verdict, words, True
        self.rebuild()

    def rebuild(self) -> None:
        if not self.shown:
            return
        v = self.verdict
        if v is None:
            self.set_lines([Text("diagnosis: n/a", style="dim")])
            return
        parts = [verdict_text(v, self.words)]
        who = culprit_text(v)
        if who is not None:
            parts.append(who)
        if v.advice:
            parts.append(Text("advice: " + v.advice, style="italic"))
        width = max(20, self.wh[0] or 80)
        compact = self.app.has_class("-short")  # 80x24: at most three lines of evidence, five of advice
        advice_rows = self.SHORT_ADVICE_ROWS_MANY if len(self.app.model.statics) > 1 else 5
        wrapped = [list(part.wrap(self.app.console, width, overflow="fold")) for part in parts]
        keeps = [min(len(w), (3 if i == 0 else advice_rows) if compact else 8) for i, w in enumerate(wrapped)]
        if who is not None and compact:
            keeps[1] = min(len(wrapped[1]), 2)
        self.natural_rows = sum(keeps)
        while self.max_rows is not None and sum(keeps) > self.max_rows:
            # the advice gives up its rows first, then the culprit's, then the verdict's; at one row each, the advice
            i = next((i for i in reversed(range(len(keeps))) if keeps[i] > 1), None)
            if i is None and len(keeps) > 2 and keeps[-1]:
                keeps[-1] = 0
            elif i is None:
                break
            else:
                keeps[i] -= 1
        lines: list[Text] = []
        for w, keep in zip(wrapped, keeps):
            if not keep:
                continue
            if len(w) > keep:
                w = w[:keep]
                w[-1].truncate(width - 1)
                w[-1].append("…")
            lines.extend(w)
        self.set_lines(lines)


def verdict_text(v, words: str = "") -> Text:
    """'verdict: NAME 95% · last 5.1 s, means: EVIDENCE': the class, its confidence, the window it judged
    (shaded on the charts) and the numbers of that window (the bars beside it are instantaneous)."""
    t = Text.assemble(("verdict: ", "bold"))
    t.append(v.display_name(), style="bold yellow" if v.cls != "idle" else "bold green")
    if v.confidence is not None:
        t.append(f" {v.confidence:.0%}")
    if words:
        t.append(f" · {words}", style="reverse")
    if v.evidence_text:
        t.append(", means: " if words else ": ")
        t.append(v.evidence_text)
    return t


def culprit_text(v) -> Text | None:
    """'culprit: rank 1 (pid N, GPU 1): in f at train.py:16 (`code`) ... · k: every rank's stack' where
    the ranks' stacks named who holds this GPU's job up (gputop/analysis/collectives.py keeps the record in the
    verdict's job): the culprit and its place first, so that one row at 80 columns still says where (who waits is
    the verdict's evidence; the whole judgement is k's); None where the stacks named nobody, or where the verdict's
    own evidence already says it (the culprit's GPU)."""
    said = culprit_place((getattr(v, "job", None) or {}).get("culprit") or {})
    if not said or said in (v.evidence_text or ""):
        return None
    t = Text.assemble(("culprit: ", "bold red"))
    t.append(said)
    t.append(" · k: every rank's stack", style="dim")
    return t
