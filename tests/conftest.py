import atexit
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

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
