"""throttled (power/thermal-throttled): clocks held down by heat or a hardware slowdown (subclass "thermal",
"hardware"), or by a power cap far below normal ("power"). An overlay: it takes the verdict from the class of what
the GPU does (listed in ``mixed``) as soon as it fits, since no number of such a window is representative.

The clock-event reasons that mean "slowed by heat or hardware" (abnormal on any load) and the power cap are words
of gputop.telemetry.sample (THERMAL_REASONS, POWER_CAP_REASON), counted over busy samples.
References: [H200] a bf16 matmul loop sits at its power limit with the SM clock at 74% of max on an H200.
"""

from __future__ import annotations

from gputop.analysis import thresholds as T
from gputop.analysis.evidence import thermal_reasons_seen
from gputop.analysis.rules.base import MULTI4, TRACES, Example, Rule, Score, pct_text as _p, ramp, watts as _w
from gputop.analysis.rules.compute_bound import clock_text
from gputop.analysis.vocabulary import Cls, Sub

# Share of busy samples with a thermal reason: 10% is a blip, 30% is throttled.
THERMAL_SAMPLE_FRACTION = (0.10, 0.30)
# The power cap is normal under a compute-bound load: a bf16 matmul loop sits at its power limit with
# the SM clock at 74% of max on an H200 [H200] (75-90% on other parts). It is the main problem only
# when it holds the SM clock far down: at or below 45% of max (a lowered power limit), not at all
# above 60%.
POWER_CAP_SAMPLE_FRACTION = (0.20, 0.50)
POWER_CAP_CLOCK_RATIO = (0.45, 0.60)  # reversed: a lower clock ratio scores higher


def score(ev: dict, hints: dict) -> Score:
    thermal = ramp(ev.get("thermal_sample_fraction"), THERMAL_SAMPLE_FRACTION)
    ratio_clk = ev.get("sm_clock_ratio")
    capped = ramp(ev.get("power_cap_sample_fraction"), POWER_CAP_SAMPLE_FRACTION)
    power = capped * (1 - ramp(ratio_clk, POWER_CAP_CLOCK_RATIO)) if ratio_clk is not None else 0.0
    if thermal >= power:
        reasons = thermal_reasons_seen(ev)
        sub = Sub.THERMAL if any("thermal" in r for r in reasons) or not reasons else Sub.HARDWARE
    else:
        sub = Sub.POWER
    # at the power cap, the clock not held far down: normal under a heavy load (said in a note)
    return Score(max(thermal, power), sub, facts={"power_cap_normal": capped > 0 and power < T.MIXED_MIN_SCORE})


def describe(sub, ev: dict) -> str:
    clock = clock_text(ev)
    if sub == Sub.POWER:
        share = _p(100 * (ev.get("power_cap_sample_fraction") or 0))
        return (f"power cap in {share} of busy "
                f"samples at {_w(ev.get('power_w'))}/{_w(ev.get('power_limit_w'))} W, SM clock "
                f"{_p(100 * (ev.get('sm_clock_ratio') or 0))} of max{clock}")
    reasons = ", ".join(thermal_reasons_seen(ev)) or "thermal slowdown"
    return f"{reasons} in {_p(100 * (ev.get('thermal_sample_fraction') or 0))} of busy samples{clock}"


ADVICE = {
    Sub.POWER:
        "the power limit holds the clocks far below max: check `nvidia-smi -q -d POWER` for a lowered limit; "
        "numbers from this window are not representative",
    None:
        "clocks are lowered by heat or a hardware slowdown: check cooling, airflow and power delivery; numbers "
        "from this window are not representative",
}


def takes_over(ev: dict, board, base, hints: dict) -> bool:
    return board.scores[Cls.THROTTLED] >= T.MIXED_MIN_SCORE


def notes(ev: dict, board, main) -> list[str]:
    if main == Cls.THROTTLED or not board.own_score(Cls.THROTTLED).facts["power_cap_normal"]:
        return []
    return [f"power cap reached in {_p(100 * ev['power_cap_sample_fraction'])} of busy samples "
            f"({_w(ev.get('power_w'))}/{_w(ev.get('power_limit_w'))} W) with the SM clock at "
            f"{_p(100 * (ev.get('sm_clock_ratio') or 0))} of max: normal under a heavy load"]


def missing(ev: dict, board) -> list[str]:
    return (["SM clock vs max (throttling check)"]
            if ev.get("max_sm_clock_mhz") is None or ev.get("sm_clock_mhz") is None else [])


EXAMPLES = (
    Example(TRACES + "matmul_bf16.compute-bound.jsonl.gz", 0, 4.0, 8.0, False,
            "a bf16 matmul at its power cap with the SM clock high enough: normal under a heavy load"),
    Example(MULTI4 + "straggler.jsonl.gz", 1, 12.0, 16.0, False,
            "the straggler of its job (3x the matmuls): compute-bound; its clock as more work holds it, not heat"),
)

RULE = Rule(Cls.THROTTLED, score, describe, ADVICE, examples=EXAMPLES, notes=notes, missing=missing,
            takes_over=takes_over, overlay=True,
            no_recorded_example="no recorded trace has a GPU held down by heat, a hardware slowdown or a lowered "
                                "power limit: its positive cases are tests/test_classify.py's windows")
