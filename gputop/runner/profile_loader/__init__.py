"""The loader ``gputop --run --profile -- CMD`` gives a Python child: this folder, first on its PYTHONPATH.

Its ``sitecustomize.py`` runs at the child's start-up (Python's ``site`` imports it), runs the user's own
``sitecustomize`` if there is one, and starts one daemon thread that waits for gputop's requests in the
private folder named by ``protocol.DIR_ENV``. The loader loads its siblings by their paths (the child's own
folder comes first on its sys.path, and gputop may not be importable there); they are stdlib only at import.

``protocol.py`` is the one spelling of the files both sides write and read (each written whole, then renamed into
place): ``loaded-PID`` from each process that loads the loader; ``request-N`` from gputop (N = 1, 2, ...; its text
``SECONDS MAX_STEPS START_AT``: the window ends after that many seconds or steps and starts at the first step after
that Unix time); ``window-N-PID.json`` from every Python process of the command that carries the loader: the
window's summary, or ``{"status": "unavailable", "reason": ...}`` (a program that ends with a request pending
answers at its exit). gputop imports ``protocol`` only (``session/profiling.py``); the rest runs in the child
(``kernel_spans``, a window's kernel timeline, is read by bench/tools/hta_compare.py and the tests too).
"""

from pathlib import Path

LOADER_DIR = str(Path(__file__).resolve().parent)
