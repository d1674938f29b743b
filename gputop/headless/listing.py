"""``gputop --list [--json]``: every workload, its one-line description, its parameters and defaults,
and what it needs with how to install it (marked where it is not installed here)."""

from __future__ import annotations

import json

from gputop import exitcodes
from gputop.documents import write_stdout
from gputop.runner.params import format_value
from gputop.runner.registry import Registry
from gputop.workload.script import install_hint


def render_text(registry: Registry) -> str:
    if not len(registry):
        return "no workloads found (looked in: " + ", ".join(str(d) for d in registry.dirs) + ")\n"
    lines: list[str] = []
    for spec in registry:
        lines.append(f"{spec.name:<14} {spec.description}")
        width = max((len(p.name) for p in spec.params), default=0)
        for p in spec.params:
            lines.append(f"    {p.name:<{width}}  default {format_value(p.default):<22} {p.allowed()}"
                         + (f"  -- {p.help}" if p.help else ""))
        extras = []
        if spec.quick:
            extras.append("--quick: " + " ".join(f"{k}={format_value(v)}" for k, v in spec.quick.items()))
        if spec.supports_cpu:
            extras.append("--device cpu" + (": " + " ".join(f"{k}={format_value(v)}" for k, v in spec.cpu.items())
                                             if spec.cpu else ""))
        if extras:
            lines.append("    (" + "; ".join(extras) + ")")
        absent = spec.not_installed()
        for need in spec.needs:
            lines.append(f"    needs {need}: {install_hint(need)}" + (" (not installed)" if need in absent else ""))
        if not spec.runnable:
            lines.append(f"    cannot run here without {', '.join(spec.missing)} (imported at the top of {spec.path.name})")
        lines.append("")
    lines.append("run one: gputop --run NAME [--param NAME=VALUE ...] [--quick] [--device cpu] [--json]")
    return "\n".join(lines) + "\n"


def main_list(json_mode: bool = False) -> int:
    registry = Registry()
    for err in registry.errors:
        exitcodes.say(f"skipped a workload: {err}")
    if json_mode:
        text = json.dumps([spec.describe() for spec in registry], indent=2, default=str) + "\n"
    else:
        text = render_text(registry)
    return exitcodes.OK if write_stdout(text) else exitcodes.FAILED
