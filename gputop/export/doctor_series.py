"""Each exported GPU's last ``gputop --doctor`` as Prometheus series (read from
:mod:`gputop.telemetry.doctor_state`, at most every 10 s, when a scrape asks):

* ``gputop_doctor_status``: 0 ok, 1 degraded, 2 failed;
* ``gputop_doctor_timestamp_seconds``: when that doctor ran (Unix time): alert on a node whose doctor is old;
* ``gputop_doctor_figure{figure}``: each measured figure (SI units: bytes/s, FLOP/s, MHz), what
  ``gputop --doctor --source prometheus=URL`` takes the fleet's median of, per ``modelName``;
* ``gputop_doctor_findings{status}``: how many findings of each status.
"""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily

from gputop.telemetry.doctor_state import LastDoctor

STATUS_VALUE = {"ok": 0.0, "degraded": 1.0, "failed": 2.0}


def doctor_families(last: LastDoctor, gpus, rows, names: list[str]):
    """The families for ``gpus`` (the collector's ExportedGpu: ``labels["UUID"]``; ``rows(g)``: its label sets)."""
    status = GaugeMetricFamily("gputop_doctor_status", "The GPU's last gputop --doctor: 0 ok, 1 degraded, 2 failed.",
                               labels=names + ["mode"])
    stamp = GaugeMetricFamily("gputop_doctor_timestamp_seconds", "When the GPU's last gputop --doctor ran (Unix time).",
                              labels=names)
    figure = GaugeMetricFamily("gputop_doctor_figure", "A figure the GPU's last gputop --doctor measured (SI units: "
                               "bytes/s, FLOP/s, MHz).", labels=names + ["figure"])
    count = GaugeMetricFamily("gputop_doctor_findings", "The GPU's findings of its last gputop --doctor, by status.",
                              labels=names + ["status"])
    for g in gpus:
        st = last.get(g.labels.get("UUID"))
        if not st or st.get("status") not in STATUS_VALUE:
            continue
        for labels in rows(g):
            status.add_metric(labels + [str(st.get("mode") or "")], STATUS_VALUE[st["status"]])
            if st.get("unix_time"):
                stamp.add_metric(labels, float(st["unix_time"]))
            for name, v in sorted((st.get("figures") or {}).items()):
                if isinstance(v, (int, float)):
                    figure.add_metric(labels + [name], float(v))
            for s, n in sorted((st.get("counts") or {}).items()):
                count.add_metric(labels + [s], float(n))
    yield status
    yield stamp
    yield figure
    yield count
