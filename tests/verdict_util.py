"""Checks every test of a verdict shares: the document shape (the schemas' verdict definition) and that the
evidence sentence quotes the evidence numbers (each number in ``evidence_text`` is one of ``evidence``'s,
rounded as shown, possibly as a percentage of a fraction or with an SI prefix)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema

SCHEMAS = Path(__file__).resolve().parents[1] / "gputop" / "schema"
# A number as a sentence shows it: maybe negative, not part of a word ("bf16", "FP32", "L2", "1-element"),
# maybe with an SI prefix before its unit ("4.81 TB/s", "66.9 TFLOP/s").
NUMBER = re.compile(r"(?<![\w.-])(-?\d+(?:\.\d+)?)(?:\s?([kMGTP])(?=[A-Za-z/]))?")
SI = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
QUOTED = re.compile(r"'[^']*'")  # names quoted in a sentence ('batch=64', '+persistent') are not numbers
# nor are the names of a place in a program or of a process: quoted code (`time.sleep(3600)`), a file's line
# (train.py:16), a pid, a rank, a GPU's index (what the ranks' stacks say of a culprit: its where, not a measure)
NAMES = re.compile(r"`[^`]*`|[\w./<>-]+\.py:\d+|\b(?:pid|rank|ranks|GPU)s? \d+(?:(?:, | and |-)\d+)*")


def quoted_numbers(text: str) -> list[tuple[float, int, str | None]]:
    """(value, decimals shown, SI prefix or None) of each number in ``text``."""
    out = []
    for m in NUMBER.finditer(NAMES.sub("''", QUOTED.sub("''", text))):
        digits = m.group(1)
        out.append((float(digits), len(digits.split(".")[1]) if "." in digits else 0, m.group(2)))
    return out


def shown_as(value: float, shown: float, decimals: int, prefix: str | None) -> bool:
    """Whether ``value`` of the evidence reads as ``shown`` in the sentence."""
    tol = 0.5 * 10 ** -decimals + 1e-9
    for scaled in (value, 100 * value) + ((value / SI[prefix],) if prefix else ()):
        if abs(scaled - shown) <= tol * (1 + 1e-6):
            return True
    return False


def unquoted(v: dict) -> list[str]:
    """The numbers of ``v["evidence_text"]`` that are none of ``v["evidence"]``'s numbers."""
    values = [x for x in (v.get("evidence") or {}).values() if isinstance(x, (int, float))]
    bad = []
    for shown, decimals, prefix in quoted_numbers(v.get("evidence_text") or ""):
        if not any(shown_as(float(x), shown, decimals, prefix) for x in values):
            bad.append(f"{shown:g}{prefix or ''}")
    return bad


def check_text_quotes_evidence(v: dict) -> None:
    bad = unquoted(v)
    assert not bad, f"{bad} in {v.get('evidence_text')!r} are not evidence numbers {v.get('evidence')}"


def verdict_schema(name: str = "run") -> dict:
    """The verdict definition of ``gputop/schema/<name>.schema.json``, as a schema of its own."""
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    return {"$defs": schema["$defs"], "$ref": "#/$defs/verdict"}


def check_verdict(v: dict, schema: str = "run") -> None:
    """A verdict dict as a document holds it: the one shape, a sentence, advice, and agreeing numbers."""
    assert isinstance(v, dict), v
    jsonschema.validate(v, verdict_schema(schema))
    assert v["evidence"] and v["evidence_text"] and v["advice"], v
    check_text_quotes_evidence(v)
