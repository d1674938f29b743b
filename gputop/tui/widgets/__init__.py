"""Reusable widgets of the TUI: ``Lines`` (rows of ready-made text), the charts, the history chart, the key bar,
the layout containers."""
