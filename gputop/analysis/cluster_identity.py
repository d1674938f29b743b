"""Which GPU a series is: the cluster's rule of identity (pure; no HTTP here).

A GPU is its UUID, as its exporter labelled it (``UUID``, ``uuid`` with dcgm-exporter's old names), seen through
one scrape target (Prometheus' ``instance`` and ``job`` labels): :func:`gpu_id`. A series without a UUID is its
target's GPU of that index (``gpu`` label). Nothing else joins two series into one GPU: not the host name (two
hosts may share one: containers, cloned VMs, a node re-imaged under its old name, recordings of one machine played
back) and not the index (every node has a GPU 0).

Two targets may claim one UUID. Where one of them runs ``gputop --export`` (it exports verdicts) and the other is
a dcgm-exporter on the same machine (the same node name: ``Hostname``/``hostname``, else the target's host
address), they are one GPU seen twice, the deployment this project recommends: :func:`resolve` makes them one row,
the numbers of the gputop target first. Otherwise every claim stays a row of its own and each is flagged
(:func:`duplicate_note`): a cloned exporter, a replay of a recording, or one exporter scraped by two jobs; counting
them as one GPU would hide one of them, counting them apart would double its GPU-hours, so the page shows both
and says so.
"""

from __future__ import annotations

from gputop.telemetry.dcgm_fields import LABEL_GPU, LABELS_HOSTNAME, LABELS_UUID

NODE_LABELS = (*LABELS_HOSTNAME, "instance")  # the labels that name a series' node, the first present

GpuId = tuple  # ("uuid", UUID, instance, scrape job) or ("index", instance or node, scrape job, gpu index)


def uuid_of(labels: dict) -> str | None:
    return labels.get("UUID") or labels.get("uuid") or None  # (LABELS_UUID: a fleet's answer has 100,000 series)


def node_label(labels: dict) -> str | None:
    """The label that names a series' node: a host label, else ``instance``; None for neither."""
    return next((name for name in NODE_LABELS if labels.get(name)), None)


def node_of(labels: dict) -> str:
    """The node a series comes from: its host label, else the scrape's ``instance``."""
    name = node_label(labels)
    return labels[name] if name else "?"


def gpu_id(labels: dict) -> GpuId:
    """The GPU a series is of (see the module's text)."""
    instance, job = labels.get("instance") or "", labels.get("job") or ""
    uuid = labels.get("UUID") or labels.get("uuid")
    if uuid:
        return ("uuid", uuid, instance, job)
    return ("index", instance or node_of(labels), job, labels.get(LABEL_GPU, "?"))


def target_text(labels: dict) -> str:
    """The scrape target that exported a series, for people: ``instance`` (scrape job ``job``)."""
    instance, job = labels.get("instance"), labels.get("job")
    if not instance:
        return f"node {node_of(labels)}"
    return instance + (f" (scrape job {job})" if job else "")


def host_of(instance: str) -> str:
    """The host part of an ``instance`` (``10.0.0.5:9400`` -> ``10.0.0.5``, ``[::1]:9400`` -> ``::1``)."""
    if instance.startswith("["):
        return instance[1:].split("]", 1)[0]
    head, sep, port = instance.rpartition(":")
    return head if sep and port.isdigit() else instance


def machine_of(labels: dict) -> str:
    """The machine a target runs on, for pairing a dcgm-exporter with the gputop beside it: its host label, else the
    host part of its ``instance``."""
    host = next((labels[n] for n in LABELS_HOSTNAME if labels.get(n)), None)
    return host or host_of(labels.get("instance") or "")


def resolve(ids: dict[GpuId, dict], exports_verdicts: set[GpuId]) -> tuple[dict[GpuId, GpuId], dict[GpuId, list]]:
    """``ids``: every GPU id seen, with a label set of its series; ``exports_verdicts``: those whose target runs
    ``gputop --export``. Returns ``(merged, duplicates)``: ``merged`` maps a dcgm-exporter's id to the gputop id it
    is the same GPU as (same UUID, same machine, one such gputop target); ``duplicates`` maps each id left whose UUID
    another id left claims too to those other ids' label sets."""
    by_uuid: dict[str, list[GpuId]] = {}
    for gid in ids:
        if gid[0] == "uuid":
            by_uuid.setdefault(gid[1], []).append(gid)
    merged: dict[GpuId, GpuId] = {}
    duplicates: dict[GpuId, list] = {}
    for claims in by_uuid.values():
        if len(claims) < 2:
            continue
        gputop = [g for g in claims if g in exports_verdicts]
        rest = []
        for g in claims:
            if g in exports_verdicts:
                continue
            beside = [t for t in gputop if machine_of(ids[t]) == machine_of(ids[g])]
            if len(beside) == 1:
                merged[g] = beside[0]
            else:
                rest.append(g)
        left = gputop + rest
        if len(left) > 1:
            for g in left:
                duplicates[g] = [ids[o] for o in left if o != g]
    return merged, duplicates


def duplicate_note(uuid: str, others: list[dict]) -> str:
    """The flag of a GPU another target claims too."""
    where = ", ".join(f"{target_text(o)} as {node_of(o)} GPU {o.get(LABEL_GPU, '?')}" for o in others)
    return (f"UUID {uuid} also exported by {where}: a cloned exporter, a replayed recording or one exporter scraped "
            "twice; shown apart, not merged")
