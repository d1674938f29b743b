"""The workloads page: the picker (workloads, descriptions, editable parameters), run / cancel,
and the results of the selected run (live while it runs; finished runs stay and can be saved).

The page draws itself when the app's frame asks (``draw``) and carries out the workload keys the app
routes to it (r, c, d, s, and n: the tour's next stop) through the model (gputop/tui/model: the run
controller, the device workloads run on, the run shown, the selected GPU), whose changes it follows (the
workloads loaded: the list; another device: the form's defaults).
"""

from __future__ import annotations

import asyncio

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, Label, OptionList, Static

from gputop.runner.params import format_value, resolve
from gputop.tui.messages import Redraw, ShowPage
from gputop.tui.model import DEVICE, SPECS, TuiModel
from gputop.tui.model.runs import RecordingSpec, default_values, parse_values, save_document
from gputop.tui.results.panel import ResultsView
from gputop.tui.widgets.lines import Lines
from gputop.workload.params import ParamError


class ParamForm(Vertical):
    """One Input per parameter of the selected workload (the detail pane around it scrolls)."""

    DEFAULT_CSS = """
    ParamForm { height: auto; }
    ParamForm Horizontal { height: 1; }
    ParamForm Label { width: 16; }
    ParamForm Input { width: 1fr; height: 1; border: none; padding: 0 1; }
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.spec = None
        self.loaded: tuple | None = None  # (spec, device) whose inputs are mounted
        self._lock = asyncio.Lock()  # one load at a time (a highlight and a d can overlap)

    async def load(self, spec, device: str) -> None:
        async with self._lock:
            self.spec, self.loaded = spec, None
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
            self.loaded = (spec, device)

    def texts(self) -> dict[str, str]:
        return {inp.id[len("param-"):]: inp.value for inp in self.query(Input)}


class WorkloadsPage(Vertical):
    # Esc leaves the form (as its hint says) for the workload list, where q, ? and the page keys work again;
    # Textual's Input keeps the focus on Esc, and every key, q included, would be typed into the field
    BINDINGS = [Binding("escape", "leave_form", "leave the form", show=False)]
    DEFAULT_CSS = """
    WorkloadsPage #wl-top { height: 14; }
    /* the list as wide as its longest name (up to 40% of the screen) and as tall as its entries */
    WorkloadsPage #wl-list { width: auto; max-width: 40%; min-width: 16; height: auto; max-height: 100%;
                             scrollbar-size-vertical: 1; }
    WorkloadsPage #wl-detail { width: 1fr; padding: 0 1; }
    WorkloadsPage #wl-scroll { height: 1fr; scrollbar-size-vertical: 1; }
    WorkloadsPage #wl-desc { height: auto; }
    WorkloadsPage #wl-hint { height: auto; color: $text-muted; }
    WorkloadsPage #wl-runs { height: 1; }
    """

    def __init__(self, model: TuiModel, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.model = model
        model.observe(self._model_changed)
        self.form = ParamForm(id="wl-params")
        self.results = ResultsView(id="wl-results")

    def compose(self) -> ComposeResult:
        with Horizontal(id="wl-top"):
            yield OptionList(id="wl-list")
            with Vertical(id="wl-detail"):
                # 80x24: the description and the form scroll, not cut; the pane itself takes no focus (Tab goes from
                # the list to the first parameter, not to a pane drawn as nothing)
                with VerticalScroll(id="wl-scroll", can_focus=False):
                    yield Static(id="wl-desc")
                    yield self.form
                yield Static(id="wl-hint")
        yield Lines(id="wl-runs")
        yield self.results

    @property
    def specs(self) -> list:
        return self.model.specs

    def on_mount(self) -> None:
        self.add_class("-no-run")  # until a run is shown, the list and the form have the page (gputop.tcss)
        if self.model.specs_loaded:
            self.show_specs()

    def _model_changed(self, change: str) -> None:
        if not self.is_mounted:
            return
        if change == SPECS:
            self.show_specs()
        elif change == DEVICE and self.spec is not None:
            self.run_worker(self.form.load(self.spec, self.model.device))

    def show_specs(self) -> None:
        """List the app's workloads (once they are loaded)."""
        ol = self.query_one("#wl-list", OptionList)
        ol.clear_options()
        ol.add_options([s.name for s in self.specs])
        if not self.specs:
            why = "; ".join(self.model.spec_errors[:2]) or "no workloads found"
            self.query_one("#wl-desc", Static).update(Text(f"no workloads: {why}", style="red"))

    @property
    def spec(self):
        ol = self.query_one("#wl-list", OptionList)
        i = ol.highlighted
        return self.specs[i] if i is not None and 0 <= i < len(self.specs) else None

    def focus_list(self) -> None:
        """Shown: the workload list takes the focus (its first entry highlighted)."""
        if self.specs:
            ol = self.query_one("#wl-list", OptionList)
            if ol.highlighted is None:
                ol.highlighted = 0
            ol.focus()

    # -- drawing -----------------------------------------------------------------------------------
    def no_gpu_line(self) -> str:
        return f"no live GPU in this session: {self.model.no_gpu}; workloads run on the CPU"

    def draw(self) -> None:
        app, model = self.app, self.model
        spec = self.spec
        where = model.where() + (" (no live GPU)" if model.no_gpu else "")
        hint = Text(f"runs on: {where}  Enter/r run  c cancel  d cpu/gpu  Esc leaves the form", style="dim")
        if isinstance(spec, RecordingSpec):
            hint = Text("a recorded run: Enter/r replays it as it happened (no GPU needed), c stops it", style="dim")
        focused = app.focused
        if spec is not None and focused is not None and (focused.id or "").startswith("param-"):
            p = next((p for p in spec.params if p.name == focused.id[len("param-"):]), None)
            if p is not None:
                hint = Text(f"{p.name}: {p.help} ({p.allowed()}; default {p.default})")
        self._set_static(self.query_one("#wl-hint", Static), hint)
        if spec is not None:
            desc = Text(spec.description)
            notes = []
            if spec.needs:
                notes.append("needs " + ", ".join(spec.needs))
            if not spec.supports_cpu:
                notes.append("needs a GPU; there is no live GPU in this session" if model.no_gpu else "GPU only")
            if notes:
                desc.append("  (" + "; ".join(notes) + ")", style="dim")
            self._set_static(self.query_one("#wl-desc", Static), desc)
        runs = model.controller.runs
        shown = model.shown_state()
        if self.has_class("-no-run") != (shown is None):  # the list's height changes: keep its entry in view
            self.set_class(shown is None, "-no-run")
            ol = self.query_one("#wl-list", OptionList)
            self.call_after_refresh(ol.scroll_to_highlight)
        line = Text()
        if runs:
            line.append(f"run {runs.index(shown) + 1}/{len(runs)} ", style="bold")
            line.append("([ ] to switch, s to save JSON)", style="dim")
            if shown.saved_to:
                line.append(f"  saved: {shown.saved_to}", style="green")
        self.query_one("#wl-runs", Lines).set_lines([line])
        self.results.show_run(shown)

    @staticmethod
    def _set_static(widget: Static, content: Text) -> None:
        """Update a Static only when its text changed (an update re-lays the page out)."""
        if getattr(widget, "_gputop_shown", None) != content:
            widget._gputop_shown = content
            widget.update(content)

    # -- events ------------------------------------------------------------------------------------
    async def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        await self.form.load(self.specs[event.option_index], self.model.device)
        self.post_message(Redraw())

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.start_run()

    def on_input_submitted(self) -> None:
        self.start_run()

    def on_descendant_focus(self) -> None:
        self.post_message(Redraw())  # the hint follows the focused parameter

    def action_leave_form(self) -> None:
        if self.specs and self.app.focused is not self.query_one("#wl-list", OptionList):
            self.focus_list()

    # -- the keys the app routes here --------------------------------------------------------------
    def refused(self, what: str) -> bool:
        """A read-only view (gputop --serve without --serve-control): say so, and True (refused)."""
        why = self.model.refusal(what)
        if why:
            self.notify(why, severity="warning")
        return why is not None

    def run_key(self) -> None:
        """r: on this page, run the selected workload; on another, show this page first."""
        if self.display:  # the page shown (the switcher hides the other)
            self.start_run()
        else:
            self.post_message(ShowPage("workloads"))

    def autoplay(self, path: str) -> None:
        """gputop --replay RUN.jsonl.gz: the recorded run plays along with its telemetry."""
        self.model.load_specs()
        spec = next((s for s in self.model.specs if getattr(s, "path", None) == str(path)), None)
        if spec is not None:
            self.replay(spec)

    def toggle_device(self) -> None:
        model = self.model
        if model.no_gpu:
            self.notify(self.no_gpu_line(), severity="warning")
            return
        model.set_device("cuda" if model.device == "cpu" else "cpu")
        self.notify(f"workloads run on the {'CPU' if model.device == 'cpu' else 'GPU'}")

    def start_run(self) -> None:
        model = self.model
        spec = self.spec
        if isinstance(spec, RecordingSpec):  # a replay uses no GPU: a read-only browser view may play one too
            self.replay(spec)
            return
        if self.refused("run a workload"):
            return
        if spec is None:
            self.notify("no workload selected", severity="warning")
            return
        if model.device == "cpu" and not spec.supports_cpu:
            why = f"no live GPU in this session ({model.no_gpu})" if model.no_gpu else "press d to run on the GPU"
            self.notify(f"{spec.name} needs a GPU: {why}", severity="warning")
            return
        if model.device == "cuda" and model.no_gpu:
            self.notify(self.no_gpu_line(), severity="warning")
            return
        try:
            state = self.start(spec, parse_values(spec, self.form.texts()), model.device)
        except (ParamError, RuntimeError, ValueError, OSError) as exc:
            self.notify(str(exc), severity="error")
            return
        if state.run.finished and state.run.status == "error":  # it could not start: say why, at once
            errors = state.document().get("errors") or [{}]
            self.notify(f"{state.name} did not start: {errors[-1].get('message')}", severity="error")
        else:
            self.notify(f"started {state.name} on {state.target}")

    def start(self, spec, values: dict, device: str):
        """Start ``spec`` live (the monitor watches this session's own source again) and show its run (its
        RunState); the controller's errors are the caller's to say."""
        model = self.model
        model.go_home()
        state = model.controller.start(spec, values, device, model.nvml_index() if device == "cuda" else None,
                                       timeout=model.config.timeout, grace_s=model.config.grace_s)
        model.show_run(None)
        return state

    def replay(self, spec: RecordingSpec) -> None:
        model = self.model
        try:
            state = model.controller.replay(spec, model.config.run_speed)
        except (RuntimeError, ValueError) as exc:  # one playing already; a file that is not a whole recording
            self.notify(str(exc), severity="error")
            return
        model.show_run(None)
        if model.follow_recording(state):  # no live GPU: the monitor shows the recording's own telemetry
            self._come_back_after(state)
        self.notify(f"replaying {spec.name}")

    def _come_back_after(self, state) -> None:
        """Once the followed replay ends (or is stopped), the monitor shows the session's own source again."""
        model, followed = self.model, self.model.source

        def back_when_over() -> None:
            if model.source is not followed:  # a live run or another replay took over already
                timer.stop()
            elif not state.active:
                timer.stop()
                model.go_home()
                self.notify(f"the replay of {state.name} is over: the monitor shows {model.describe()} again")

        timer = self.set_interval(0.5, back_when_over)

    def cancel_run(self) -> None:
        model = self.model
        if self.refused("cancel a run"):
            return
        hit = model.controller.cancel(model.where()) or model.controller.cancel()
        self.notify("stopping " + ", ".join(r.name for r in hit) if hit else "nothing is running",
                    severity="information" if hit else "warning")

    def save_shown(self) -> None:
        model = self.model
        if self.refused("save a run"):
            return
        st = model.shown_state()
        if st is None:
            self.notify("no run to save", severity="warning")
            return
        try:
            st.saved_to = save_document(st.document(), model.config.save_dir)
        except OSError as exc:
            self.notify(f"cannot save: {exc}", severity="error")
            return
        self.notify(f"saved {st.saved_to}" + (" (partial: still running)" if st.active else ""))
        self.post_message(Redraw())

    # -- the tour (gputop --tour) ------------------------------------------------------------------
    def tour_next(self) -> None:
        """n: stop the run that still goes (on a worker thread: a workload gets its grace period), then go to
        the tour's next stop and start it."""
        model = self.model
        if model.tour is None:
            self.notify("n steps through gputop --tour (start gputop with --tour)", severity="warning")
            return
        model.load_specs()
        if not model.controller.active:
            self._tour_go()
            return
        self.notify("tour: stopping " + ", ".join(r.name for r in model.controller.active) + "...")

        def stop_then_go() -> None:
            model.controller.stop_all()
            self.app.call_from_thread(self._tour_go)

        self.run_worker(stop_then_go, thread=True, group="tour")

    def _tour_go(self) -> None:
        model = self.model
        stop = model.tour.advance(model)
        self.post_message(Redraw())
        if stop is None:  # the tour is over (its line says so)
            return
        name, spec = stop
        self.post_message(ShowPage("workloads"))
        self.query_one("#wl-list", OptionList).highlighted = model.specs.index(spec)
        if isinstance(spec, RecordingSpec):
            self.replay(spec)
            return
        if self.refused("run a workload"):
            return
        device = "cpu" if model.no_gpu else "cuda"
        try:
            self.start(spec, resolve(spec, {}, device, quick=True), device)
        except (ParamError, RuntimeError, ValueError, OSError) as exc:
            self.notify(f"tour: {name} did not start: {exc}", severity="error")
            return
        self.notify(f"started {name} on {'the CPU' if device == 'cpu' else 'the GPU'}")
