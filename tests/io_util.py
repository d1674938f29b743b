"""Helpers of the bad-input tests (issue 35): a real ``python -m gputop`` process on real inputs, and what every
refusal must look like (the README's exit code, one line on stderr, no traceback, with ``--json`` exactly one
document on stdout)."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

from fault_util import PY, ROOT, env

DEMO = ROOT / "gputop" / "data" / "demo.jsonl.gz"
RUN_S = 120  # the longest one gputop may take on a loaded machine: a hang fails the test at this bound


def gputop(*args: str, stdin=subprocess.DEVNULL, input: bytes | None = None, fake_nvml: bool = False,
           timeout: float = RUN_S, cwd: Path | None = None, **extra_env: str) -> subprocess.CompletedProcess:
    """``python -m gputop ARGS`` (text out); ``input``: bytes on a pipe to its stdin."""
    if input is not None:
        stdin = None
    r = subprocess.run([PY, "-m", "gputop", *args], cwd=cwd or ROOT, env=env(fake_nvml=fake_nvml, **extra_env),
                       stdin=stdin, input=input, capture_output=True, timeout=timeout)
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode("utf-8", "replace"),
                                       r.stderr.decode("utf-8", "replace"))


def one_line(r: subprocess.CompletedProcess, code: int, needle: str = "") -> str:
    """``r`` exited ``code`` with one line on stderr (holding ``needle``) and no traceback; returns the line."""
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "Error:" not in r.stderr.split("gputop:")[0], r.stderr[-2000:]
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr[-2000:]
    assert lines[0].startswith("gputop: ") and needle in lines[0], lines[0]
    assert all(c.isprintable() for c in lines[0]), repr(lines[0])
    return lines[0]


def one_document(r: subprocess.CompletedProcess) -> dict:
    """stdout holds exactly one JSON document (json.loads refuses anything after it)."""
    return json.loads(r.stdout)


def flipped(data: bytes, seed: int, n: int = 20, skip: int = 100) -> bytes:
    """``data`` with ``n`` bytes flipped, away from its first and last ``skip`` bytes (the gzip header, trailer)."""
    rng = random.Random(seed)
    out = bytearray(data)
    for i in rng.sample(range(skip, len(out) - skip), n):
        out[i] ^= 0xFF
    return bytes(out)
