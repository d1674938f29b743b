"""One finding of ``gputop --doctor`` (pure): a check's status, its number, the number expected and where that
expectation comes from; and how findings add up to a GPU's and a node's status."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

OK, DEGRADED, FAILED, NA = "ok", "degraded", "failed", "n/a"
STATUSES = (OK, DEGRADED, FAILED, NA)
RANK = {NA: -1, OK: 0, DEGRADED: 1, FAILED: 2}  # n/a: not checked, counts for nothing


@dataclass
class Finding:
    """``check``: what was checked (ecc, row_remap, dram_bytes_per_s, p2p, ...); ``status``: ok / degraded / failed /
    n/a (not checked: why in ``message``); ``message``: one sentence with the numbers; ``gpu``: the NVML index it is
    about (None: the node; ``gpus``: a pair); ``value``/``expected``/``unit``: the number and the one it was judged
    against; ``source``: where the expectation comes from; ``references``: for a measured figure, every reference it
    was judged against (the model's, the node's other GPUs', the fleet's), each with its own status."""

    check: str
    status: str
    message: str
    gpu: int | None = None
    gpus: list[int] | None = None
    value: float | int | str | None = None
    expected: float | int | str | None = None
    unit: str | None = None
    source: str | None = None
    references: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def worst(statuses) -> str:
    """The worst of ``statuses`` (ok when there is none that counts)."""
    best = OK
    for s in statuses:
        if RANK.get(s, -1) > RANK[best]:
            best = s
    return best


def counts(findings: list[Finding]) -> dict:
    out = {s: 0 for s in STATUSES}
    for f in findings:
        out[f.status] = out.get(f.status, 0) + 1
    return out
