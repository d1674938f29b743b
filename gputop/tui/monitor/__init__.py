"""The monitor page: the page, its panels, the GPU strip, the live verdict (what it shows as plain data is the
model's ``view``; a run's results, gputop/tui/results/)."""
