"""Watching a process tree (a command gputop runs, or a running pid) and reporting on it: ``monitor.py`` (sample
every GPU, find the ones the tree uses, diagnose each), ``finder.py`` (which GPUs, and the ticks kept), ``command.py``
(the watched command or pid as a ``Run``, through the one supervisor), ``profiling.py`` (when to ask the command's
Python processes for a profiler window, and what came back), ``report.py`` (the document and its text).

The fleet read from Prometheus is ``gputop/fleet``; judging gputop against labelled traces is ``gputop/evaluate``."""
