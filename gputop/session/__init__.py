"""Watching one process (a command gputop runs, or a running pid): its monitor, its supervision, its report."""
