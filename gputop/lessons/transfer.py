"""The transfer run's analysis: a verdict per copy phase (pageable or pinned, each direction, and the host
memcpy baseline) with the size below which copies are latency-bound, a verdict per streams mode, the run's
verdict, and the CSV rows: ``analyze(doc)`` and ``csv_rows(doc)``, which gputop runs on the run document of
``workloads/transfer.py`` (and that script, run on its own, through ``gputop.workload.util.print_verdicts``)."""

from __future__ import annotations

from gputop.analysis.verdict import Verdict
from gputop.format import si
from gputop.lessons.docs import (
    by_key, cuda_peaks, is_number, phase_points, phase_window, points_with, tele_numbers, tele_text,
    throttle_warnings)
from gputop.lessons.figures import Curves

COPY_PHASES = ["h2d pageable", "h2d pinned", "d2h pageable", "d2h pinned"]

# Copies are PCIe-bound by nature; the subclass says what limits them: pageable memory (the staging
# memcpy), or the link itself (pinned, near its peak). Below the half-bandwidth size a copy is
# latency-bound: its fixed cost outweighs the bytes.

NEAR_LINK = 0.5  # the same bar as the live classifier's "link" subclass (thresholds.PCIE_NEAR_LINK_FRACTION)

ADVICE = {
    "pageable": "copy from pinned memory (pin_memory=True, DataLoader(pin_memory=True)) with non_blocking=True: the "
                "copy engine then reads it directly instead of through a staging memcpy",
    "link": "the link is the limit: move fewer bytes (keep data on the GPU, send bf16/uint8), or overlap the copies "
            "with compute on other streams",
    "host memcpy": "this is the staging cost every pageable copy pays on top of the PCIe transfer; pinned buffers "
                   "skip it",
    "cache": "these copies fit the last-level cache, so they measure the cache: for the DRAM bandwidth that a large "
             "pageable copy's staging pays, copy more than twice the cache's size (--param max_log2)",
    "serial": "split the work into chunks and chain upload -> compute -> download with events on three streams, "
              "from pinned memory, so the stages of different chunks overlap",
    "overlapped": "the stages overlap: the slowest stage (a copy direction) now sets the time",
}


def _size(b: float) -> str:
    """Bytes in decimal units, as the verdict sentences quote them."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def half_bandwidth(pts: list[dict]) -> dict | None:
    """The smallest copy that reaches half the phase's best bandwidth: below it, copies are latency-bound."""
    best = max(q["gb_per_s"] for q in pts)
    return next((q for q in sorted(pts, key=lambda q: q["bytes"]) if q["gb_per_s"] >= best / 2), None)


def copy_verdict(ph: dict, pts: list[dict], link: float | None, by_phase: dict, llc: int | None = None) -> dict:
    """``llc``: the host's last-level cache (bytes; None unknown): a host memcpy whose source and destination fit
    it runs at the cache's speed, not DRAM's."""
    big, small = max(pts, key=lambda q: q["bytes"]), min(pts, key=lambda q: q["bytes"])
    in_cache = big["kind"] == "host memcpy" and llc is not None and 2 * big["bytes"] <= llc
    half = half_bandwidth(pts)
    for q in pts:  # each size's regime: below the half-bandwidth size the fixed cost per copy dominates
        q["regime"] = "latency-bound" if half and q["bytes"] < half["bytes"] else "bandwidth-bound"
    bps = big["gb_per_s"] * 1e9
    memory = big.get("memory")
    ev = {"bytes": big["bytes"], "bytes_per_s": bps, "link_bytes_per_s": link,
          "link_fraction": bps / link if link else None, "small_bytes": small["bytes"], "small_us": 1e3 * small["ms"],
          "half_bandwidth_bytes": half["bytes"] if half else None}
    what = "host memcpy" if big["kind"] == "host memcpy" else f"{big['direction'].upper()} from {memory} memory"
    text = f"{what} at {_size(big['bytes'])}: {bps / 1e9:.1f} GB/s"
    if big["kind"] == "host memcpy" and llc is not None:
        ev["llc_bytes"] = llc
        text += (f"; every copy fits the {_size(llc)} last-level cache (source and destination): the cache's speed, "
                 "not DRAM's" if in_cache else f", its source and destination past the {_size(llc)} last-level cache "
                 "(DRAM)")
    if link and big["kind"] != "host memcpy":
        text += f" = {100 * ev['link_fraction']:.0f}% of the {link / 1e9:.1f} GB/s link"
    if memory == "pageable":
        other = (by_phase.get(f"{big['direction']} pinned") or [])
        pin = max((q for q in other if q["bytes"] == big["bytes"]), key=lambda q: q["gb_per_s"], default=None)
        if pin:
            ev["pinned_bytes_per_s"], ev["pinned_speedup"] = pin["gb_per_s"] * 1e9, pin["gb_per_s"] / big["gb_per_s"]
            text += f"; pinned {pin['gb_per_s']:.1f} GB/s ({ev['pinned_speedup']:.1f}x)"
    text += f"; a {_size(small['bytes'])} copy takes {ev['small_us']:.1f} us"
    if half:
        text += f", and copies under {_size(half['bytes'])} are latency-bound (fixed cost per copy)"
    if big["kind"] == "host memcpy":
        cls, sub = "memory-bound", "cache" if in_cache else "host memcpy"
    elif memory == "pageable" or (link and ev["link_fraction"] < NEAR_LINK):
        cls, sub = "pcie-bound", "pageable" if memory == "pageable" else "below link"
    else:  # pinned: near the link's peak, or pinned against a link of unknown peak (no NVML)
        cls, sub = "pcie-bound", "link" if link else "pinned"
    if tele_text(ph):
        ev.update(tele_numbers(ph))
        text += "; GPU " + tele_text(ph)
    advice = ADVICE.get(sub, ADVICE["link"])
    return Verdict(cls, sub, None, ev, text, advice, **phase_window(ph)).to_dict()


def streams_verdict(ph: dict, q: dict) -> dict:
    ev = {"total_ms": q["total_ms"], "upload_ms": q["upload_ms"], "compute_ms": q["compute_ms"],
          "download_ms": q["download_ms"], "chunks": q["chunks"], "speedup_vs_serial": q.get("speedup_vs_serial")}
    text = (f"upload {q['upload_ms']:.2f} ms, compute {q['compute_ms']:.2f} ms, download {q['download_ms']:.2f} ms "
            f"of GPU time; {q['total_ms']:.2f} ms end to end")
    if q.get("speedup_vs_serial"):
        text += f" ({q['speedup_vs_serial']:.2f}x the one-stream version)"
    if q["mode"] == "seed":
        text += "; the seed's three streams synchronize after every stage, so nothing overlaps"
    sub = "overlapped" if q["mode"] == "chunked" and (q.get("speedup_vs_serial") or 0) > 1 else "serial"
    if q["mode"] == "chunked":
        text += (f"; {q['chunks']} chunks on three streams overlap their uploads, sines and downloads"
                 if sub == "overlapped" else f"; {q['chunks']} chunks on three streams gained nothing here")
    if tele_text(ph):
        ev.update(tele_numbers(ph))
        text += "; GPU " + tele_text(ph)
    return Verdict("pcie-bound", sub, None, ev, text, ADVICE[sub], **phase_window(ph)).to_dict()


def analyze(doc: dict) -> dict:
    link = ((doc.get("device") or {}).get("peaks") or {}).get("pcie_bytes_per_s_per_dir")
    by_phase = {k: [q for q in v if not q.get("skipped")] for k, v in phase_points(doc).items()}
    verdicts = {}
    for ph in doc.get("phases") or []:
        pts = by_phase.get(ph.get("name")) or []
        ph["verdict"] = None
        if pts and pts[0].get("kind") == "streams":
            ph["verdict"] = streams_verdict(ph, pts[-1])
        elif pts and pts[0].get("gb_per_s") is not None:
            ph["verdict"] = copy_verdict(ph, pts, link, by_phase, (doc.get("results") or {}).get("llc_bytes"))
        if ph["verdict"]:
            verdicts[ph["name"]] = ph["verdict"]
    throttle_warnings(doc)
    main_v = verdicts.get("h2d pageable") or verdicts.get("h2d pinned") or verdicts.get("host memcpy")
    if main_v is None:
        doc["verdict"] = None
        return doc
    v = dict(main_v, window=None, evidence=dict(main_v["evidence"]))
    chunked = (by_phase.get("streams chunked") or [None])[-1]
    if chunked and chunked.get("speedup_vs_serial"):
        v["evidence"]["streams_speedup"] = chunked["speedup_vs_serial"]
        v["evidence_text"] += (f"; upload/compute/download in chunks on three streams ran "
                               f"{chunked['speedup_vs_serial']:.2f}x the serial version")
    doc["verdict"] = v
    return doc


def csv_rows(doc: dict) -> list[dict]:
    """One row per copy size (bandwidth part), then one per streams mode."""
    cols = ("kind", "bytes", "ms", "gb_per_s", "mode", "total_ms", "upload_ms", "compute_ms", "download_ms",
            "speedup_vs_serial")
    return [{c: q.get(c) for c in cols} for q in doc.get("points") or [] if not q.get("skipped")]


# -- the key figure of its text report (gputop --run without --json, the script on its own) ------------

def figures(doc: dict) -> list[Curves]:
    """Copy bandwidth against size, a series per direction and memory kind, under the PCIe link's peak."""
    pts = points_with(doc, "bytes", "gb_per_s")
    if not pts:
        return []
    series = [(kind, [(q["bytes"], q["gb_per_s"] * 1e9) for q in qs]) for kind, qs in by_key(pts, "kind").items()]
    link = cuda_peaks(doc).get("pcie_bytes_per_s_per_dir")
    copies = any(str(q.get("kind", "")).startswith(("h2d", "d2h")) for q in pts)
    lines = [(f"PCIe link {si(link, 'B/s')} per direction", link)] if copies and is_number(link, True) else []
    return [Curves("copy bandwidth against transfer size", "bytes", "B/s", series, lines)]
