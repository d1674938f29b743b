"""The workloads page: the page, the runs (the TUI's side of the runner), the results as text, the tour."""
