"""The widgets' former home, kept so that ``from gputop.tui.widgets import Lines`` (gputop.tui.command)
and older imports keep working. The widgets live in ``lines`` (the Line-API base), ``panels`` (the
panels of both pages) and ``history_chart``; import them from there."""

from gputop.tui.history_chart import HistoryChart
from gputop.tui.lines import Lines, text_segments
from gputop.tui.panels import LEVEL_STYLE, DevicePanel, GpuStrip, InfoBar, ProcessTable, ResultsView, VerdictPanel

__all__ = ["HistoryChart", "Lines", "text_segments", "LEVEL_STYLE", "DevicePanel", "GpuStrip", "InfoBar",
           "ProcessTable", "ResultsView", "VerdictPanel"]
