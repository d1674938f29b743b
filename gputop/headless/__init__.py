"""The frontends without a TUI: a workload run, a wrapped command or watched process, and their text."""
