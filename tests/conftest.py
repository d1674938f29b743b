import atexit
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

# tests import their helpers (fake_nvml) by name
sys.path.insert(0, str(Path(__file__).parent))

# A shell starts a background job (`cmd &` without job control) with SIGINT ignored, and an ignored signal stays
# ignored across exec: every child a test starts would then ignore the SIGINT that gputop's supervisor stops it
# with, and the tests that wait for that stop would time out. gputop's own entry points install handlers for
# SIGINT (so their children start with it at its default); the tests drive the supervisor directly, so the
# suite does the same here, whatever launched it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Each GPU's last gputop --doctor is kept in a state folder (gputop/telemetry/doctor_state.py) that --export and the
# TUI read: the suite gets an empty one of its own (the processes it starts inherit it), so that this machine's
# doctor never shows up in a test; a doctor test sets its own (monkeypatch.setenv).
_DOCTOR_DIR = tempfile.mkdtemp(prefix="gputop-tests-doctor-")
os.environ["GPUTOP_DOCTOR_DIR"] = _DOCTOR_DIR
atexit.register(shutil.rmtree, _DOCTOR_DIR, True)


QUICK_WORKERS = 2  # the quick loop on this many processes (the project's machines have 2 cores)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """The quick loop, `pytest -m "not slow"`, runs on 2 workers (pytest-xdist, of the test extra) unless `-n` says
    otherwise: on 2 cores it takes half the time (README, "the inner loop"). The full suite (`scripts/test`) runs
    one test at a time, as CI does."""
    opt = config.option
    worker = hasattr(config, "workerinput") or "PYTEST_XDIST_WORKER" in os.environ  # (a worker runs this hook too:
    # given workers of its own, each would start two more, and so on)
    if (not worker and getattr(opt, "numprocesses", False) is None and not opt.collectonly
            and " ".join((opt.markexpr or "").split()) == "not slow" and config.pluginmanager.hasplugin("xdist")):
        opt.numprocesses = QUICK_WORKERS
