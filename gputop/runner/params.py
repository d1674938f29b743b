"""A workload's parameter values on the command line: ``--param k=v`` in, the child's argv text out."""

from __future__ import annotations

from gputop.workload.params import ParamError, resolve_params


def format_value(value) -> str:
    """A parameter value as the text ``Param.parse`` reads back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(format_value(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def parse_given(items: list[str]) -> dict[str, str]:
    """``--param k=v`` items as {k: "v"} (later ones win)."""
    given: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise ParamError(f"--param takes NAME=VALUE (got {item!r})")
        k, v = item.split("=", 1)
        given[k.strip()] = v
    return given


def resolve(spec, given: dict[str, str], device: str, quick: bool) -> dict:
    """The parameter values of a run: defaults, --quick, --device cpu overrides, then --param."""
    if "device" in given:
        raise ParamError("choose the device with --device cuda|cpu, not --param device=...")
    if device == "cpu" and not spec.supports_cpu:
        raise ParamError(f"workload '{spec.name}' has no CPU mode; run it on a GPU (without --device cpu)")
    overrides = dict(spec.quick) if quick else {}
    if device == "cpu":
        overrides.update(spec.cpu or {})  # the CPU sizes are a limit of the device: they win over --quick
    values = resolve_params(spec.params, given, overrides)
    if spec.has_device_param:
        values["device"] = device
    return values
