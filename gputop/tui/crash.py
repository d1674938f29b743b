"""A TUI that dies of an exception: exit ``exitcodes.INTERNAL_ERROR``, one line, the traceback in a log file.

Textual ends an app on an exception no handler caught, prints Rich's traceback (with locals) on the terminal it
leaves, and ``run()`` returns None, which gputop read as success (exit 0). Every App gputop runs (the monitor's and
the command TUI's ``GputopApp``, the cluster page's ``ClusterApp``, and so every ``--serve`` session) is a
:class:`LoggedApp`: it keeps the exception's traceback (``crash``) and prints nothing on the terminal; its way in
runs it with :func:`run` and, once the terminal is restored and what the app ran is stopped, :func:`crash_code`
writes the traceback to a new file in
:func:`log_folder` (readable by the user alone: a traceback may show a command line's arguments) and says, in one
line on stderr, what failed and where the traceback is. An exception raised out of ``app.run()`` itself (Textual's
driver) is the same crash. A crash outranks a stop signal that came meanwhile in the exit code.
"""

from __future__ import annotations

import io
import traceback

from rich.console import Console
from textual.app import App

from gputop.crashlog import report

class LoggedApp(App):
    """An App whose unhandled exception is kept as text (``crash``) instead of printed on the terminal."""

    crash: str | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # where Textual prints its rendering of the exception when the app has left the terminal: nowhere
        self.error_console = Console(file=io.StringIO(), markup=False, highlight=False)

    def _handle_exception(self, error: Exception) -> None:  # Textual's one way for an unhandled exception
        if self.crash is None:
            self.crash = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        super()._handle_exception(error)  # the app exits (under a test's pilot: the exception is raised again)


def run(app: LoggedApp) -> object:
    """``app.run()``'s result; an exception raised out of it (Textual's driver, the app's own start) kept as the
    app's ``crash`` (the result is then None)."""
    try:
        return app.run()
    except Exception:
        app.crash = app.crash or traceback.format_exc()
        return None


def crash_code(app: LoggedApp) -> int | None:
    """None when the app ended as it should; else, once its crash is logged and said in one line, INTERNAL_ERROR.
    (Called after the app's way in has stopped what the app ran: the line comes last.)"""
    return None if app.crash is None else report(app.crash)
