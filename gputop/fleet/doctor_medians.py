"""The fleet's medians of each ``gputop --doctor`` figure, per GPU model, from Prometheus: what a GPU of this node is
compared to with ``gputop --doctor --source prometheus=URL``.

Every node's ``gputop --export`` publishes its GPUs' last doctor as ``gputop_doctor_figure{figure, modelName, ...}``
(:mod:`gputop.export.doctor_series`); one query asks the median and one the count of each (model, figure) over the
series Prometheus holds now. The fleet includes this node's own last results. A server that cannot be asked is not
a failure of the node: the answer says why, and the doctor judges against the model and the node alone.
"""

from __future__ import annotations

from gputop.telemetry.errors import SourceError
from gputop.telemetry.prometheus import PrometheusClient

SERIES = "gputop_doctor_figure"
MEDIAN = f"quantile by (modelName, figure) (0.5, {SERIES})"
COUNT = f"count by (modelName, figure) ({SERIES})"


def fleet_medians(url: str, client: PrometheusClient | None = None) -> dict:
    """``{"url", "medians": {model: {figure: {"value", "gpus"}}}, "why"}`` (``why``: None, or why there is none)."""
    client = client or PrometheusClient(url)
    try:
        medians, counts = client.query(MEDIAN), client.query(COUNT)
    except SourceError as exc:
        return {"url": url, "medians": {}, "why": f"not read ({exc})"}
    n = {(r["metric"].get("modelName"), r["metric"].get("figure")): int(float(r["value"][1])) for r in counts}
    out: dict[str, dict] = {}
    for r in medians:
        model, figure = r["metric"].get("modelName"), r["metric"].get("figure")
        try:
            value = float(r["value"][1])
        except (TypeError, ValueError, IndexError):
            continue
        if model and figure and value == value:  # NaN: no sample
            out.setdefault(model, {})[figure] = {"value": value, "gpus": n.get((model, figure), 0)}
    why = None if out else f"no {SERIES} series in {url} (no node's gputop --export has a doctor's result yet)"
    return {"url": url, "medians": out, "why": why}
