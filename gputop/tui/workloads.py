"""The workloads page: the picker (workloads, descriptions, editable parameters), run / cancel,
and the results of the selected run (live while it runs; finished runs stay and can be saved)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, Label, OptionList, Static

from gputop.tui import results
from gputop.tui.runs import default_values, format_value
from gputop.tui.widgets import Lines


class ResultsView(Lines):
    """The results of one run: roofline plot or throughput bars, sized to the widget."""

    DEFAULT_CSS = "ResultsView { height: 1fr; min-height: 3; }"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.doc: dict | None = None
        self.progress: dict | None = None

    def show(self, doc: dict | None, progress: dict | None = None) -> None:
        self.doc, self.progress = doc, progress
        self.rebuild()

    def rebuild(self) -> None:
        w, h = self.size.width, self.size.height
        if w <= 0 or h <= 0:
            return
        if self.doc is None:
            self.set_lines([Text("no run yet: pick a workload and press r (or Enter on its name)", style="dim")])
            return
        lines = [results.status_line(self.doc, self.progress)]
        lines += results.results_lines(self.doc, w, h - 1)
        self.set_lines(lines)


class ParamForm(VerticalScroll):
    """One Input per parameter of the selected workload."""

    DEFAULT_CSS = """
    ParamForm { height: 1fr; }
    ParamForm Horizontal { height: 1; }
    ParamForm Label { width: 16; }
    ParamForm Input { width: 1fr; height: 1; border: none; padding: 0 1; }
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.spec = None

    async def load(self, spec, device: str) -> None:
        self.spec = spec
        await self.remove_children()
        rows = []
        for name, value in default_values(spec, device).items():
            p = next(p for p in spec.params if p.name == name)
            inp = Input(value=format_value(value), id=f"param-{name}", placeholder=p.allowed())
            inp.tooltip = f"{p.help} ({p.allowed()})"
            rows.append(Horizontal(Label(name), inp))
        if not rows:
            rows.append(Label("(no parameters)"))
        await self.mount_all(rows)

    def texts(self) -> dict[str, str]:
        return {inp.id[len("param-"):]: inp.value for inp in self.query(Input)}


class WorkloadsPage(Vertical):
    DEFAULT_CSS = """
    WorkloadsPage #wl-top { height: 14; }
    WorkloadsPage #wl-list { width: 24; height: 100%; }
    WorkloadsPage #wl-detail { width: 1fr; padding: 0 1; }
    WorkloadsPage #wl-desc { height: auto; max-height: 3; }
    WorkloadsPage #wl-hint { height: 1; color: $text-muted; }
    WorkloadsPage #wl-runs { height: 1; }
    """

    def __init__(self, specs: list, errors: list[str], *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.specs = specs
        self.errors = errors

    def compose(self) -> ComposeResult:
        with Horizontal(id="wl-top"):
            yield OptionList(*[s.name for s in self.specs], id="wl-list")
            with Vertical(id="wl-detail"):
                yield Static(id="wl-desc")
                yield ParamForm(id="wl-params")
                yield Static(id="wl-hint")
        yield Lines(id="wl-runs")
        yield ResultsView(id="wl-results")

    def on_mount(self) -> None:
        if not self.specs:
            why = "; ".join(self.errors[:2]) or "no workloads found"
            self.query_one("#wl-desc", Static).update(Text(f"no workloads: {why}", style="red"))

    @property
    def spec(self):
        ol = self.query_one("#wl-list", OptionList)
        i = ol.highlighted
        return self.specs[i] if i is not None and 0 <= i < len(self.specs) else None
