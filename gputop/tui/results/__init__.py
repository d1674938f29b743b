"""A run's results, one home for both pages: ``panel.ResultsView`` (the widget the monitor page and the workloads
page show), ``view`` (the results as text: the status line, the plot or the bars, the verdict; pure) and ``lessons/``
(the lessons that draw their own, by workload name). Under the pages, over the model (tests/test_architecture.py)."""
