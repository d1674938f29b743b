"""``gputop --export``: OpenMetrics/Prometheus series under dcgm-exporter's names, plus gputop's verdict.

``dcgm_names.py`` (the series written, from the one DCGM table in ``telemetry/dcgm_fields.py``), ``collector.py`` (the
scrape-time collector), ``server.py`` (the address, the GPUs exported, the HTTP server, stopping).
"""
