"""``gputop --doctor [--quick | --passive] [--json] [-o FILE] [--gpu N ...] [--source prometheus=URL]``: is every GPU
of this node healthy, and as fast as its model should be.

The passive checks need NVML alone (and the kernel log for XIDs: root reads it); the active ones (a load on every
GPU at once, :mod:`gputop.session.doctor`) need torch and CuPy: without them it exits 4 before anything runs,
saying ``--passive`` works. The verdict: 0 healthy, 7 degraded, 8 failed (README, "Is this node healthy"). Each GPU's
result is kept for ``--export`` and the TUI (:mod:`gputop.telemetry.doctor_state`); an interrupted run keeps none.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputop import exitcodes
from gputop.documents import check_writable, emit, writable
from gputop.headless.doctor_text import doctor_text

ACTIVE_NEEDS = ("torch", "cupy")


@dataclass(frozen=True)
class DoctorCall:
    """What the command line asked: ``gpus`` (NVML indices; empty: all), ``mode`` (full, quick, passive),
    ``fleet_url`` (``--source prometheus=URL``: the fleet's medians), ``keep`` (write the state files)."""

    gpus: tuple[int, ...] = ()
    mode: str = "full"
    fleet_url: str | None = None
    json_mode: bool = False
    output: str | None = None
    keep: bool = True


def missing_for(mode: str) -> list[str]:
    """The packages the active checks need that are not installed here (none for ``--passive``)."""
    if mode == "passive":
        return []
    from gputop.workload.script import is_installed

    return [p for p in ACTIVE_NEEDS if not is_installed(p)]


def main_doctor(call: DoctorCall, nvml=None, options=None) -> int:
    """Run the doctor and write its document; gputop's exit code. ``nvml``/``options``: a test's own (an
    :class:`~gputop.telemetry.nvml.Nvml` over recorded answers; :class:`~gputop.session.doctor.DoctorOptions`)."""
    from gputop.documents import doctor_error_document

    def refuse(code: int, kind: str, message: str) -> int:
        exitcodes.say(message)
        if call.json_mode or call.output:
            emit(doctor_error_document(kind, message, code, call.mode), json_mode=call.json_mode,
                 output=call.output if writable(call.output) else None)
        return code

    try:
        check_writable(call.output, "--output")
    except exitcodes.Failure as exc:
        return refuse(exc.code, exc.kind, str(exc))
    from gputop.telemetry.nvml import Nvml
    from gputop.telemetry.static import device_count

    nvml = nvml or Nvml()
    if not nvml.available():
        return refuse(exitcodes.NO_GPU, "no_gpu", str(nvml.error))
    n = device_count(nvml)
    bad = [g for g in call.gpus if not 0 <= g < n]
    if bad:
        return refuse(exitcodes.USAGE, "bad_usage", f"--gpu {bad[0]}: no such GPU (this machine has {n}: 0-{n - 1})")
    missing = missing_for(call.mode)
    if missing:
        from gputop.workload.script import install_hint

        return refuse(exitcodes.MISSING_DEPENDENCY, "missing_dependency", "the active checks need "
                      + " and ".join(f"{m} ({install_hint(m)})" for m in missing)
                      + "; gputop --doctor --passive runs the NVML and kernel-log checks alone")
    return _run(call, nvml, options)


def _run(call: DoctorCall, nvml, options) -> int:
    from datetime import datetime, timezone

    from gputop.runner.run import drive
    from gputop.session.doctor import DoctorOptions, DoctorRun
    from gputop.session.doctor_document import build_document, state_records

    fleet = None
    if call.fleet_url:
        from gputop.fleet.doctor_medians import fleet_medians

        fleet = fleet_medians(call.fleet_url)
        if fleet.get("why"):
            exitcodes.say(f"the fleet's medians: {fleet['why']}")
    options = options or DoctorOptions()
    options.gpus, options.mode = tuple(call.gpus), call.mode
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    if call.mode != "passive":
        from gputop.measure.health_load import FULL, QUICK
        from gputop.telemetry.static import device_count

        n = len(call.gpus) or device_count(nvml)
        sustained = (QUICK if call.mode == "quick" else FULL)["sustained_s"]
        exitcodes.say(f"doctor: {call.mode} checks, {n} GPU{'s' if n > 1 else ''} at once, {sustained:g} s of "
                      "sustained load each (Ctrl-C stops)")
    run = drive(DoctorRun(nvml, options), on_signal="stopping the doctor's load")
    doc = build_document(run, call.mode, fleet, started_at=started)
    if call.keep:
        from gputop.telemetry.doctor_state import write_states

        records = state_records(doc)
        if records:
            doc["state_files"], why = write_states(records)
            if why:
                exitcodes.say(f"doctor: {why}")
    ok = emit(doc, json_mode=call.json_mode, output=call.output, render_text=doctor_text)
    return doc["exit_code"] if ok else exitcodes.FAILED
