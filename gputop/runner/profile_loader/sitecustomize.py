"""gputop's profile loader (gputop/runner/profile_loader): imported by ``site`` at the start of a Python program
that has this folder first on its PYTHONPATH (``gputop --run --profile`` gives it to its command;
``gputop --profile-env`` prints the line that gives it to a job's processes). Stdlib only; it never imports torch.

1. Runs the user's own ``sitecustomize`` (the next one on sys.path), as ``site`` would have.
2. Starts the agent (agent.py): the process's own folder, where any gputop of the same user finds it by its pid,
   and a daemon thread that answers gputop's requests (a profiler window, or one line why not).
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _run_user_sitecustomize():
    import importlib.machinery
    import importlib.util

    for p in sys.path:
        try:
            if os.path.abspath(p or os.curdir) == _HERE:
                continue
            spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [p or os.curdir])
        except (OSError, ImportError, ValueError):
            continue
        if spec is None or spec.loader is None:
            continue
        try:
            mod = importlib.util.module_from_spec(spec)
            sys.modules["sitecustomize"] = mod
            spec.loader.exec_module(mod)
        except Exception as err:  # what site.execsitecustomize says
            print("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s" % (err.__class__.__name__, err),
                  file=sys.stderr)
        return


def _start_agent():
    import importlib.util

    if "_gputop_agent" in sys.modules:
        return sys.modules["_gputop_agent"].start()
    spec = importlib.util.spec_from_file_location("_gputop_agent", os.path.join(_HERE, "agent.py"))
    agent = importlib.util.module_from_spec(spec)
    sys.modules["_gputop_agent"] = agent
    spec.loader.exec_module(agent)
    agent.start()


_run_user_sitecustomize()
try:
    _start_agent()
except Exception:  # never the program's problem: it runs as it would without the loader
    pass
