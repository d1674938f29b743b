"""A workload's parameters: each declared as a :class:`Param` (name, type, default, the range or choices allowed),
given as text (``--param name=text``, the TUI's inputs) and checked here, so every way of running a workload
refuses a bad value with the same message (:class:`ParamError`, exit 2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PARAM_TYPES = ("int", "float", "int_list", "float_list", "str", "bool", "choice")
DEVICES = ["cuda", "cpu"]  # a workload's "device" parameter: its CPU sizes (its module's CPU) apply with "cpu"


class ParamError(ValueError):
    """A bad parameter value; the message names the parameter and what is allowed."""


@dataclass
class Param:
    name: str
    type: str
    default: Any
    lo: float | None = None
    hi: float | None = None
    choices: list[str] = field(default_factory=list)
    help: str = ""

    def __post_init__(self):
        if self.type not in PARAM_TYPES:
            raise ValueError(f"param {self.name}: unknown type {self.type}")

    def allowed(self) -> str:
        if self.type == "choice":
            return "one of " + ", ".join(self.choices)
        if self.type == "bool":
            return "true or false"
        kind = {"int": "an integer", "float": "a number", "int_list": "comma-separated integers",
                "float_list": "comma-separated numbers", "str": "text"}[self.type]
        if self.lo is not None and self.hi is not None:
            return f"{kind} in [{_num(self.lo)}, {_num(self.hi)}]"
        if self.lo is not None:
            return f"{kind} >= {_num(self.lo)}"
        return kind

    def parse(self, text: str) -> Any:
        """Parse and validate a value given as text (``--param name=text``)."""
        text = str(text).strip()
        bad = ParamError(f"bad value for parameter '{self.name}': {text!r} (allowed: {self.allowed()})")
        try:
            if self.type == "int":
                value = _int(text)
            elif self.type == "float":
                value = float(text)
            elif self.type in ("int_list", "float_list"):
                conv = _int if self.type == "int_list" else float
                value = [conv(x) for x in text.split(",") if x.strip()]
                if not value:
                    raise bad
            elif self.type == "bool":
                if text.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise bad
                value = text.lower() in ("1", "true", "yes", "on")
            elif self.type == "choice":
                if text not in self.choices:
                    raise bad
                value = text
            else:
                value = text
        except (ValueError, OverflowError):
            raise bad from None
        self.check(value, bad)
        return value

    def check(self, value: Any, bad: ParamError | None = None) -> Any:
        bad = bad or ParamError(f"bad value for parameter '{self.name}': {value!r} (allowed: {self.allowed()})")
        items = value if isinstance(value, list) else [value]
        if self.type in ("int", "float", "int_list", "float_list"):
            for v in items:
                if v != v or (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi):
                    raise bad
        return value

    def describe(self) -> dict:
        d = {"name": self.name, "type": self.type, "default": self.default, "help": self.help,
             "allowed": self.allowed()}
        if self.choices:
            d["choices"] = self.choices
        return d


def device_param(help: str) -> Param:
    """The ``device`` parameter every teaching workload has: "cuda" (the default) or "cpu"; ``help`` says what
    each does in this workload. With "cpu", the module's ``CPU`` sizes apply (``gputop --run NAME --device cpu``)."""
    return Param("device", "choice", "cuda", choices=list(DEVICES), help=help)


def _int(text: str) -> int:
    text = text.strip().replace("_", "")
    if "**" in text:  # 2**26
        base, exp = text.split("**")
        return int(base) ** int(exp)
    if text.startswith("1<<"):
        return 1 << int(text[3:])
    return int(text)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def resolve_params(params: list[Param], given: dict[str, str], quick_overrides: dict | None = None) -> dict:
    """Defaults, then ``quick_overrides`` (for --quick), then the given ``name=text`` values, validated."""
    by_name = {p.name: p for p in params}
    unknown = [k for k in given if k not in by_name]
    if unknown:
        raise ParamError(f"unknown parameter '{unknown[0]}' (known: {', '.join(by_name) or 'none'})")
    values = {p.name: p.default for p in params}
    values.update(quick_overrides or {})
    for k, text in given.items():
        values[k] = by_name[k].parse(text)
    return values
