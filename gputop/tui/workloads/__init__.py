"""The workloads page: the picker, its parameter form and the workload keys (the runs themselves and the tour are the
model's, gputop/tui/model/; the results view is gputop/tui/results/)."""
