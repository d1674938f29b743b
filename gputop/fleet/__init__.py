"""A fleet of GPUs read from Prometheus (``gputop --source prometheus=URL``): ``reader.py`` (``ClusterReader``: every
GPU's row now, the verdicts the nodes' gputop exported or the classifier's on dcgm-exporter's series, each job's
GPU-hours by class over a range) and ``gpu_history.py`` (``read_gpu``: one GPU's series and verdicts over time, for
the cluster page's detail). The words are ``analysis/cluster_text.py``'s; the cluster page's model is the TUI's
(``tui/cluster/model.py``); ``--once`` prints it (``headless/cluster.py``)."""
