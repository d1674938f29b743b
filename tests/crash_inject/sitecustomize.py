"""A bug on purpose, for tests/test_tui_crash.py: with this folder first on PYTHONPATH and ``GPUTOP_TEST_CRASH`` set,
Python loads this module at start-up (every gputop process, ``--serve``'s sessions too), and the help screens of
gputop's TUI (``?``: the monitor's and the command TUI's ``HelpScreen``, the cluster page's ``ClusterHelp``) raise
when they are composed. So the test sees what a TUI that dies of an exception does, in a real process on a real
terminal. Nothing happens without the variable (a command a test runs under gputop imports this too)."""

import importlib.abc
import importlib.util
import os
import sys

MESSAGE = "raised on purpose by tests/crash_inject"
TARGETS = {"gputop.tui.help": "HelpScreen", "gputop.tui.cluster.help": "ClusterHelp"}
# GPUTOP_TEST_CRASH=headless: a mode without a TUI dies instead (--replay F --json: its document is never built)
HEADLESS = {"gputop.headless.replay": "replay_document"}


def _raise(self, *args, **kwargs):
    raise RuntimeError(MESSAGE)


class _Patcher(importlib.abc.MetaPathFinder):
    """Finds the target modules as usual, and patches their help screen once the module has run."""

    def find_spec(self, name, path=None, target=None):
        if name not in (HEADLESS if os.environ.get("GPUTOP_TEST_CRASH") == "headless" else TARGETS):
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            if name in HEADLESS:
                setattr(module, HEADLESS[name], _raise)
            else:
                getattr(module, TARGETS[name]).compose = _raise

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("GPUTOP_TEST_CRASH"):
    sys.meta_path.insert(0, _Patcher())
