"""gputop's profile loader: this folder, first on a Python program's PYTHONPATH (``gputop --run --profile`` gives it to
its command; ``gputop --profile-env`` prints the line that gives it to a job's processes; on Python 3.14+
``sys.remote_exec`` installs it into a running process).

Its ``sitecustomize.py`` runs at the program's start (Python's ``site`` imports it), runs the user's own
``sitecustomize`` if there is one, and starts the agent (``agent.py``): the process's own folder, found by any gputop
of the same user from the pid, and a daemon thread that answers gputop's requests there. ``protocol.py`` is the one
spelling of the folder and its files (``loaded.json``, ``request-N.json``, ``window-N.json``), imported by gputop
(``gputop/session/profile_target.py``) and loaded by path in the program. The windows: ``torch_answer.py`` and
``torch_window.py`` (torch.profiler, started at a step or on time), ``cupti_window.py`` (CUDA without torch),
``kineto_summary.py`` and ``kernel_spans.py`` (the summary; ``kernel_spans`` is read by bench/tools/hta_compare.py and
the tests too), ``quiet_stderr.py`` (a line of Kineto's kept out of the program's stderr). The loader's files are
stdlib only at import; they never import torch themselves.
"""

from pathlib import Path

LOADER_DIR = str(Path(__file__).resolve().parent)
