"""The loader ``gputop --run --profile -- CMD`` gives a Python child: this folder, first on its PYTHONPATH.

Its ``sitecustomize.py`` runs at the child's start-up (Python's ``site`` imports it), runs the user's own
``sitecustomize`` if there is one, and starts one daemon thread that waits for gputop's requests in the
private folder named by ``DIR_ENV``. Nothing here is imported by gputop itself beyond these names and
``kernel_spans`` (stdlib: a window's kernel timeline read from its chrome trace, which the loader also uses).

The protocol (files, written whole then renamed into place): each process that loads it writes ``loaded-PID``
at its start; gputop writes ``request-N`` (N = 1, 2, ...;
its text: the window's length in seconds); every Python process of the command that carries the loader
answers with ``window-N-PID.json``: the window's summary, or ``{"status": "unavailable", "reason": ...}``
(a program that ends with a request pending answers at its exit).
"""

from pathlib import Path

LOADER_DIR = str(Path(__file__).resolve().parent)
DIR_ENV = "GPUTOP_PROFILE_DIR"
