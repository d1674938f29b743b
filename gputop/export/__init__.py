"""``gputop --export``: OpenMetrics/Prometheus series under dcgm-exporter's names, plus gputop's verdict.

``dcgm_names.py`` (the one table from sample fields to dcgm-exporter's series), ``collector.py`` (the
scrape-time collector), ``server.py`` (the address, the GPUs exported, the HTTP server, stopping).
"""
