"""``gputop --doctor``'s passive checks judged: what NVML and the kernel log say of a GPU at rest (pure, no I/O).

Each rule gives a :class:`~gputop.analysis.doctor_findings.Finding` (ok / degraded / failed / n/a) with the number,
the limit and where the limit comes from. Sources, cited by the short names below:

  [DCGM-HW]  NVIDIA DCGM's health watches, ``modules/health/DcgmHealthWatch.cpp`` and its limits header
             (``DcgmGpuHardwareLimits.h``): any volatile double-bit (uncorrectable) error FAILs; a pending page
             retirement WARNs; 63 or more retired pages (single + double bit) FAIL ("updated to match the field
             diag"), and more than 15 double-bit retirements FAIL when still growing; a row-remap failure FAILs;
             an NVLink down FAILs; NVLink replay or recovery errors in the watched window FAIL, CRC errors FAIL at
             100 or more a second (each counter summed over the GPU's links, as DCGM's ``*_TOTAL`` fields are);
             more than 8 PCIe replays a minute WARN. DCGM also WARNs at any CRC error below that rate; the doctor
             does not: its limits header says "RM has informed us that CRC errors only matter at rates of 100+ per
             second", and a healthy 2x H100 node (2026-11-27, docs/benchmarks.md) counted 5-10 CRC data errors a
             second over its 18 links at rest and under load alike, with no replay or recovery error.
  [MEM]      NVIDIA GPU Memory Error Management (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt), "Row Remapping"
             and "RMA Policy": a remap takes effect at the next GPU reset; the row-remapping failure flag (a bank
             with 8 uncorrectable rows remapped asked for one more, a remapped row failed again, or 512 remaps)
             is the RMA criterion.
  [DPR]      NVIDIA Dynamic Page Retirement (docs.nvidia.com/deploy/dynamic-page-retirement): a page is retired
             after one double-bit or two single-bit errors at one address; "pending" pages are blacklisted at the
             next driver reload / reset.
  [XID]      NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors, "Analyzing Xid Errors with the Xid
             Catalog"): each Xid's meaning and its immediate action (restart the application, reset the GPU,
             reboot the node, contact support).
  [DIAG]     NVIDIA DCGM Diagnostics (docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html):
             its software deployment checks (persistence mode, processes on the GPU, page retirement, row
             remapping, ECC) and clock-event reasons during its stress tests.

Where DCGM judges a counter over a watched window (NVLink errors, PCIe replays) the doctor does the same over its
own run (the counters read before and after the load); a passive-only run reports those counters and judges none.
"""

from __future__ import annotations

from gputop.analysis.doctor_findings import DEGRADED, FAILED, NA, OK, Finding

RETIRED_PAGES_LIMIT = 63  # [DCGM-HW] DCGM_LIMIT_MAX_RETIRED_PAGES
RETIRED_DBE_SOFT_LIMIT = 15  # [DCGM-HW] DCGM_LIMIT_MAX_RETIRED_PAGES_SOFT_LIMIT (double-bit retirements)
PCIE_REPLAYS_PER_MIN = 8  # [DCGM-HW] DCGM_LIMIT_MAX_PCIREPLAY_RATE
NVLINK_CRC_PER_S = 100.0  # [DCGM-HW] DCGM_LIMIT_MAX_NVLINK_CRC_ERROR
HOT_AT_IDLE_MARGIN_C = 5  # the doctor's rule: at rest within 5 C of the slowdown threshold is a cooling problem
POWER_LIMIT_SLACK = 0.98  # the doctor's rule: an enforced limit under 98% of the default was lowered by someone
XID_WINDOW_S = 24 * 3600  # the doctor's rule: XIDs of the last 24 h are judged; older ones are listed as history
HARDWARE_REASONS = ("hardware slowdown", "hardware thermal slowdown", "hardware power brake")
SOFTWARE_THERMAL = "software thermal slowdown"

# [XID] The Xids that say something of the GPU, with the catalogue's meaning, and how the doctor judges one seen in
# the last XID_WINDOW_S. The application's own (13 graphics engine exception, 31 memory page fault, 43 GPU stopped
# processing, 45 preemptive cleanup, 68/69 engine errors) are listed as history: the catalogue's action is to
# restart the application. An Xid not in this table is listed, unjudged, with a pointer to the catalogue.
XIDS = {
    48: (FAILED, "double-bit ECC error (DBE): uncorrectable memory error"),
    61: (DEGRADED, "internal micro-controller breakpoint/warning"),
    62: (FAILED, "internal micro-controller halt"),
    63: (DEGRADED, "ECC page retirement or row-remapping event recorded: reset the GPU to apply it"),
    64: (FAILED, "ECC page retirement or row-remapper recording failure"),
    74: (DEGRADED, "NVLink error: a link retrained or failed"),
    79: (FAILED, "GPU has fallen off the bus"),
    92: (DEGRADED, "high single-bit ECC error rate"),
    94: (DEGRADED, "contained ECC error: an uncorrectable error killed the application that touched it; reset the "
                   "GPU to remap the row"),
    95: (FAILED, "uncontained ECC error: every application on the GPU is affected; reset the GPU"),
    119: (FAILED, "GSP RPC timeout: the GPU's system processor stopped answering"),
    120: (FAILED, "GSP error"),
    154: (DEGRADED, "GPU recovery action changed (the text says which action: reset, reboot, drain)"),
}
APP_XIDS = {13: "graphics engine exception", 31: "GPU memory page fault", 43: "GPU stopped processing",
            45: "preemptive cleanup, due to previous errors", 68: "video decoder exception",
            69: "graphics engine class error"}


def passive_findings(h: dict, xids: list[dict] | None = None, xid_window_s: float = XID_WINDOW_S) -> list[Finding]:
    """Every passive finding of one GPU: ``h`` is :func:`gputop.telemetry.health.read_health`'s dict, ``xids`` that
    GPU's entries of ``read_kernel_xids`` (None: the kernel log was not read)."""
    i = h.get("index")
    if h.get("lost"):
        return [Finding("gpu_lost", FAILED, "NVML says the GPU is lost (it fell off the bus, Xid 79): reboot the "
                        "node; if it comes back, reseat the card and check its power [XID]", gpu=i, source="[XID]")]
    out = [ecc_finding(h), remap_finding(h), retired_finding(h), idle_clocks_finding(h), power_limit_finding(h),
           temperature_finding(h), processes_finding(h), nvlink_state_finding(h), persistence_finding(h),
           mig_finding(h)]
    out += xid_findings(i, xids, xid_window_s)
    return [f for f in out if f is not None]


def ecc_finding(h: dict) -> Finding | None:
    i, e = h.get("index"), h.get("ecc") or {}
    if h.get("ecc_enabled") is None:
        return Finding("ecc", NA, "ECC: n/a (the GPU has no ECC, or NVML cannot say)", gpu=i)
    vol_u, agg_u = e.get("volatile_uncorrected"), e.get("aggregate_uncorrected")
    counts = (f"uncorrectable {_n(vol_u)} since the driver loaded, {_n(agg_u)} in the card's life; correctable "
              f"{_n(e.get('volatile_corrected'))} / {_n(e.get('aggregate_corrected'))}")
    if vol_u:
        return Finding("ecc", FAILED, f"uncorrectable (double-bit) memory errors since the driver loaded: {counts}; "
                       "drain the node and reset the GPU [DCGM-HW]", gpu=i, value=vol_u, expected=0,
                       source="[DCGM-HW] any volatile double-bit error fails")
    if not h["ecc_enabled"]:
        pend = " (it is switched on at the next reset)" if h.get("ecc_pending") else ""
        return Finding("ecc", DEGRADED, f"ECC is off: memory errors go undetected{pend}", gpu=i, value="off",
                       expected="on", source="[DIAG] ECC checks")
    return Finding("ecc", OK, f"ECC on; {counts}", gpu=i, value=vol_u or 0, expected=0)


def remap_finding(h: dict) -> Finding | None:
    i, r, hist = h.get("index"), h.get("remapped_rows"), h.get("remap_histogram") or {}
    if r is None:
        return None  # before Ampere: retired pages instead
    rows = f"{r['uncorrectable']} rows remapped for uncorrectable errors, {r['correctable']} for correctable ones"
    if r["failure"]:
        return Finding("row_remap", FAILED, f"a row remap failed ({rows}): the GPU qualifies for RMA once NVIDIA's "
                       "field diagnostic confirms it [MEM]", gpu=i, value="failure", expected="no failure",
                       source="[MEM] RMA policy: the row-remapping failure flag")
    if r["pending"]:
        return Finding("row_remap", DEGRADED, f"a row remap waits for a GPU reset ({rows}): reset the GPU when it "
                       "is idle (nvidia-smi -r -i N) [MEM]", gpu=i, value="pending", expected="none pending",
                       source="[MEM] a remap takes effect at the next GPU reset")
    if hist.get("none"):
        return Finding("row_remap", DEGRADED, f"{hist['none']} memory bank(s) have no spare row left ({rows}): the "
                       "next uncorrectable error there fails the remap [MEM]", gpu=i, value=hist["none"], expected=0,
                       source="[MEM] remapping for a bank with no spare row left sets the failure flag")
    return Finding("row_remap", OK, f"row remapping: {rows}, none pending, none failed", gpu=i,
                   value=r["uncorrectable"])


def retired_finding(h: dict) -> Finding | None:
    i, p = h.get("index"), h.get("retired_pages") or {}
    sbe, dbe = p.get("single_bit"), p.get("double_bit")
    if sbe is None and dbe is None:
        return None  # Ampere and newer remap rows instead (or NVML cannot say)
    total = (sbe or 0) + (dbe or 0)
    words = f"{total} retired pages ({_n(sbe)} single-bit, {_n(dbe)} double-bit)"
    if total >= RETIRED_PAGES_LIMIT:
        return Finding("retired_pages", FAILED, f"{words}: at NVIDIA's limit of {RETIRED_PAGES_LIMIT} [DCGM-HW]",
                       gpu=i, value=total, expected=f"< {RETIRED_PAGES_LIMIT}",
                       source="[DCGM-HW] DCGM_LIMIT_MAX_RETIRED_PAGES, the field diagnostic's limit")
    if p.get("pending"):
        return Finding("retired_pages", DEGRADED, f"{words}; a retirement waits for a driver reload or GPU reset "
                       "[DPR]", gpu=i, value="pending", expected="none pending",
                       source="[DCGM-HW] a pending retirement warns; [DPR]")
    if (dbe or 0) > RETIRED_DBE_SOFT_LIMIT:
        return Finding("retired_pages", DEGRADED, f"{words}: more than {RETIRED_DBE_SOFT_LIMIT} double-bit "
                       "retirements (DCGM fails the GPU if one more comes within a week) [DCGM-HW]", gpu=i,
                       value=dbe, expected=f"<= {RETIRED_DBE_SOFT_LIMIT}",
                       source="[DCGM-HW] DCGM_LIMIT_MAX_RETIRED_PAGES_SOFT_LIMIT")
    return Finding("retired_pages", OK, words, gpu=i, value=total, expected=f"< {RETIRED_PAGES_LIMIT}")


def idle_clocks_finding(h: dict) -> Finding | None:
    i, reasons = h.get("index"), h.get("clock_reasons_idle")
    if reasons is None:
        return Finding("clocks_idle", NA, "clock-event reasons at rest: n/a", gpu=i)
    hw = [r for r in reasons if r in HARDWARE_REASONS]
    if hw:
        return Finding("clocks_idle", FAILED, f"held down at rest by {', '.join(hw)}: the board's own protection "
                       "(overheating, a power-supply brake) acts with no load [DIAG]", gpu=i, value=", ".join(hw),
                       expected="no hardware slowdown", source="[DIAG] clock-event reasons")
    if SOFTWARE_THERMAL in reasons:
        return Finding("clocks_idle", DEGRADED, f"software thermal slowdown at rest ({_n(h.get('temperature_c'))} "
                       "C): the cooling does not keep up", gpu=i, value=SOFTWARE_THERMAL, expected="none",
                       source="[DIAG] clock-event reasons")
    app, default = h.get("app_sm_clock_mhz"), h.get("default_app_sm_clock_mhz")
    if app and default and app < default:
        return Finding("clocks_idle", DEGRADED, f"the application clock was lowered to {app} MHz (default "
                       f"{default} MHz): every kernel runs slower (nvidia-smi -rac resets it)", gpu=i, value=app,
                       expected=default, unit="MHz", source="NVML's default application clock")
    return Finding("clocks_idle", OK, "clocks at rest: " + (", ".join(reasons) or "no clock-event reason"), gpu=i)


def power_limit_finding(h: dict) -> Finding | None:
    i, lim, default = h.get("index"), h.get("power_limit_w"), h.get("power_default_limit_w")
    if not lim or not default:
        return Finding("power_limit", NA, "power limit: n/a", gpu=i)
    if lim < POWER_LIMIT_SLACK * default:
        return Finding("power_limit", DEGRADED, f"the power limit was lowered to {lim:.0f} W (default {default:.0f}"
                       " W): the GPU is slower under load than its model", gpu=i, value=lim, expected=default,
                       unit="W", source="NVML's default power limit")
    return Finding("power_limit", OK, f"power limit {lim:.0f} W (default {default:.0f} W)", gpu=i, value=lim,
                   expected=default, unit="W")


def temperature_finding(h: dict) -> Finding | None:
    i, t, slow = h.get("index"), h.get("temperature_c"), h.get("slowdown_temperature_c")
    if t is None or not slow:
        return None
    if t >= slow - HOT_AT_IDLE_MARGIN_C:
        return Finding("temperature_idle", DEGRADED, f"{t} C at rest, within {HOT_AT_IDLE_MARGIN_C} C of the "
                       f"slowdown threshold {slow} C: check the airflow (or a job just ended)", gpu=i, value=t,
                       expected=f"< {slow - HOT_AT_IDLE_MARGIN_C}", unit="C", source="NVML's slowdown threshold")
    return None


def processes_finding(h: dict) -> Finding | None:
    i, procs = h.get("index"), h.get("processes")
    if procs is None:
        return Finding("processes", NA, "processes on the GPU: n/a", gpu=i)
    if procs:
        who = ", ".join(f"{p['pid']} {p.get('name') or '?'}" + (f" ({p['user']})" if p.get("user") else "")
                        for p in procs[:4]) + (" ..." if len(procs) > 4 else "")
        return Finding("processes", DEGRADED, f"{len(procs)} process(es) hold the GPU: {who}; the active checks "
                       "skip it (their figures would be the sharing's)", gpu=i, value=len(procs), expected=0,
                       source="[DIAG] processes on the GPU")
    return None


def nvlink_state_finding(h: dict) -> Finding | None:
    i, links = h.get("index"), h.get("nvlinks") or []
    if not links:
        return None
    down = [lk["link"] for lk in links if not lk["active"]]
    up = len(links) - len(down)
    if down and up:
        return Finding("nvlink_state", FAILED, f"NVLink {', '.join(map(str, down))} down while {up} are up: "
                       "traffic to the other GPUs runs slower, and NCCL may fail [DCGM-HW]", gpu=i, value=up,
                       expected=len(links), unit="links", source="[DCGM-HW] an NVLink down fails")
    if down:
        return Finding("nvlink_state", OK, f"no NVLink up (0 of {len(links)}): none connected (an NVSwitch system "
                       "needs nvidia-fabricmanager running)", gpu=i, value=0, unit="links")
    return Finding("nvlink_state", OK, f"{up} NVLinks up", gpu=i, value=up, unit="links")


def persistence_finding(h: dict) -> Finding | None:
    if h.get("persistence_mode") is False:
        return Finding("persistence", OK, "persistence mode is off: the first CUDA call of each job pays the "
                       "driver's start (nvidia-persistenced keeps it loaded)", gpu=h.get("index"), value="off")
    return None


def mig_finding(h: dict) -> Finding | None:
    if h.get("mig_enabled"):
        return Finding("mig", OK, "MIG mode is on: the active checks need the whole GPU and skip it",
                       gpu=h.get("index"), value="on")
    return None


def xid_findings(i: int, xids: list[dict] | None, window_s: float = XID_WINDOW_S) -> list[Finding]:
    """One finding per Xid number seen on the GPU: judged by :data:`XIDS` when one is recent (or of unknown
    age), listed as history otherwise."""
    out = []
    by_code: dict[int, list[dict]] = {}
    for x in xids or []:
        by_code.setdefault(x["xid"], []).append(x)
    for code, seen in sorted(by_code.items()):
        recent = [x for x in seen if x.get("age_s") is None or x["age_s"] <= window_s]
        ages = [x["age_s"] for x in seen if x.get("age_s") is not None]
        when = f", the last {_age(min(ages))} ago" if ages else ""
        last = seen[-1].get("text") or ""
        meaning = XIDS.get(code, (None, APP_XIDS.get(code)))[1] or "not in gputop's table: see NVIDIA's Xid catalogue"
        words = f"Xid {code} x{len(seen)}{when}: {meaning}" + (f" ({last[:60]})" if last else "")
        status = XIDS[code][0] if code in XIDS and recent else OK
        if status != OK:
            words += " [XID]"
        elif code in XIDS:
            words += f" (older than {window_s / 3600:.0f} h: history)"
        out.append(Finding("xid", status, words, gpu=i, value=code, source="[XID] the Xid catalogue"))
    return out


def window_findings(i: int, before: dict, after: dict, seconds: float) -> list[Finding]:
    """NVLink error counters and the PCIe replay counter over the doctor's own run (``before``/``after``: two
    ``read_health`` dicts of GPU ``i``, ``seconds`` apart), judged as DCGM's health watch judges its window."""
    out = []
    if seconds <= 0:
        return out
    r0, r1 = (before.get("pcie") or {}).get("replay_counter"), (after.get("pcie") or {}).get("replay_counter")
    if r0 is not None and r1 is not None:
        per_min = (r1 - r0) / seconds * 60
        status = DEGRADED if per_min > PCIE_REPLAYS_PER_MIN else OK
        out.append(Finding("pcie_replays", status, f"{r1 - r0} PCIe replays in the {seconds:.0f} s run ({per_min:.1f}"
                           f" a minute; {r1} since the driver loaded)" + (" [DCGM-HW]" if status != OK else ""),
                           gpu=i, value=round(per_min, 2), expected=f"<= {PCIE_REPLAYS_PER_MIN}", unit="per minute",
                           source="[DCGM-HW] DCGM_LIMIT_MAX_PCIREPLAY_RATE"))
    old = {lk["link"]: lk["errors"] for lk in before.get("nvlinks") or []}
    grew_by: dict[str, int] = {}  # counter -> its growth summed over the links
    links: dict[str, list[str]] = {}
    for lk in after.get("nvlinks") or []:
        e0 = old.get(lk["link"]) or {}
        for name, v in (lk.get("errors") or {}).items():
            if v is None or e0.get(name) is None or v <= e0[name]:
                continue
            grew_by[name] = grew_by.get(name, 0) + v - e0[name]
            links.setdefault(name, []).append(f"link {lk['link']} {name} +{v - e0[name]}")
    if after.get("nvlinks"):
        out.append(_nvlink_errors(i, grew_by, links, seconds))
    return out


def _nvlink_errors(i: int, grew_by: dict[str, int], links: dict[str, list[str]], seconds: float) -> Finding:
    """The NVLink error counters' growth over the run judged: a replay or recovery error fails, CRC errors fail at
    ``NVLINK_CRC_PER_S`` a second (the counter that grew most, summed over the links) and below that rate are
    said, not judged [DCGM-HW]."""
    source = (f"[DCGM-HW] replay/recovery errors fail; CRC errors matter at {NVLINK_CRC_PER_S:g} a second or more "
              "(DCGM_LIMIT_MAX_NVLINK_CRC_ERROR, over the GPU's links)")
    hard = {k: v for k, v in grew_by.items() if not k.startswith("crc")}
    crc = {k: v for k, v in grew_by.items() if k.startswith("crc")}
    if hard:
        named = [w for k in hard for w in links[k]]
        return Finding("nvlink_errors", FAILED, "NVLink errors during the run: " + ", ".join(named[:8])
                       + (f" and {len(named) - 8} more" if len(named) > 8 else "") + " [DCGM-HW]", gpu=i,
                       value=sum(hard.values()), expected=0, unit="errors", source=source)
    if not crc:
        return Finding("nvlink_errors", OK, "no NVLink error during the run", gpu=i, value=0, expected=0,
                       unit="errors", source=source)
    per_s = max(crc.values()) / seconds
    counts = ", ".join(f"{k} +{v} over {len(links[k])} link(s)" for k, v in sorted(crc.items()))
    if per_s >= NVLINK_CRC_PER_S:
        worst_links = sorted((w for k in crc for w in links[k]), key=lambda w: -int(w.rsplit("+", 1)[1]))[:4]
        return Finding("nvlink_errors", FAILED, f"NVLink CRC errors during the run: {counts}, {per_s:.0f} a second "
                       f"(at or above {NVLINK_CRC_PER_S:g}; most on {', '.join(worst_links)}) [DCGM-HW]", gpu=i,
                       value=round(per_s, 2), expected=f"< {NVLINK_CRC_PER_S:g}", unit="per second", source=source)
    return Finding("nvlink_errors", OK, f"NVLink CRC errors during the run: {counts} ({per_s:.1f} a second, under "
                   f"the {NVLINK_CRC_PER_S:g} at which NVIDIA says they matter)", gpu=i,
                   value=round(per_s, 2), expected=f"< {NVLINK_CRC_PER_S:g}", unit="per second", source=source)


def _n(v) -> str:
    return "n/a" if v is None else str(v)


def _age(s: float) -> str:
    return f"{s / 86400:.1f} d" if s >= 86400 else f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.0f} min"
