"""The workloads page: the picker, its parameter form and the workload keys, and the results as text (the runs
themselves and the tour are the model's, gputop/tui/model/)."""
