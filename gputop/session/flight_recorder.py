"""PyTorch's flight recorder in a command gputop runs: switched on, dumped on demand, read.

For ``--run -- CMD`` gputop sets in the command's environment (each only where the user did not set it):

* ``TORCH_NCCL_TRACE_BUFFER_SIZE`` and ``TORCH_FR_BUFFER_SIZE`` = ``BUFFER`` (2000): every rank keeps its last
  2000 collectives (ProcessGroupNCCL's, and gloo's from torch 2.8): op, sequence id, sizes, state, the Python frames
  that issued it. The cost is a ring buffer entry per collective;
* ``TORCH_NCCL_DEBUG_INFO_PIPE_FILE`` = ``<private folder>/pipe_``: each NCCL rank makes a FIFO
  ``pipe_<rank>.pipe`` there (ProcessGroupNCCL's heartbeat monitor, only where the buffer size is > 0 and
  ``TORCH_NCCL_ENABLE_MONITORING`` is not 0) and dumps its flight recorder when a byte is written into it, polling
  it about once a second: a dump on demand, while the job hangs, not only at NCCL's watchdog timeout (10 min);
* ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` and ``TORCH_FR_DUMP_TEMP_FILE`` = ``<private folder>/dump_``: where each rank's
  dump goes, ``dump_<rank>`` (the DebugInfoWriter's: torch's pickle).

:meth:`FlightRecorder.dump` writes into every rank's pipe and reads the dumps that come back within a few seconds
(:mod:`gputop.analysis.fr_dumps` judges them); :meth:`dump_async` does it on a thread of its own. A command that is
not PyTorch, or runs gloo only, makes no pipe: one line says there was nothing to ask. A user's own pipe and dump
paths are used as they are.
"""

from __future__ import annotations

import glob
import os
import shutil
import stat
import tempfile
import threading
import time

from gputop.analysis.fr_dumps import DumpError, collective_rate, first_mismatch, load, rank_of_file

BUFFER = 2000
BUFFER_VARS = ("TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE")
PIPE_VAR = "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"
DUMP_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")  # torch reads the first one set
DUMP_WAIT_S = 8.0  # a rank polls its pipe about once a second, then pickles its ring on a thread of its own
MAX_DUMP_BYTES = 64 << 20


class FlightRecorder:
    """The flight recorder of one command: ``env(base)`` switches it on, ``dump()`` asks every rank for a dump."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="gputop-fr-")  # 0700: ours alone
        self.pipe_stem = os.path.join(self.folder, "pipe_")
        self.dump_stem = os.path.join(self.folder, "dump_")
        self._lock = threading.Lock()
        self._busy = False
        self.dumps = 0  # dumps asked for
        self.latest: dict | None = None  # the last dump's result (dump())
        self.read_at: float | None = None

    def env(self, base: dict) -> dict:
        """``base`` with the flight recorder on (module doc); what the user set stays."""
        out = dict(base)
        if not any(out.get(v) for v in BUFFER_VARS):
            out.update({v: str(BUFFER) for v in BUFFER_VARS})
        if out.get(PIPE_VAR):
            self.pipe_stem = out[PIPE_VAR]
        else:
            out[PIPE_VAR] = self.pipe_stem
        mine = next((out[v] for v in DUMP_VARS if out.get(v)), None)
        if mine:
            self.dump_stem = mine
        else:
            out.update({v: self.dump_stem for v in DUMP_VARS})
        return out

    def pipes(self) -> list[str]:
        """The ranks' FIFOs (``<pipe stem><rank>.pipe``)."""
        out = []
        for p in glob.glob(glob.escape(self.pipe_stem) + "*.pipe"):
            try:
                if stat.S_ISFIFO(os.stat(p).st_mode):
                    out.append(p)
            except OSError:
                continue
        return sorted(out)

    def trigger(self) -> int:
        """A byte into every rank's pipe (never blocking: a pipe whose rank is gone is skipped); how many."""
        poked = 0
        for p in self.pipes():
            try:
                fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader (the rank exited); ENOENT: removed meanwhile
                continue
            try:
                os.write(fd, b"1")
                poked += 1
            except OSError:
                pass
            finally:
                os.close(fd)
        return poked

    def _dump_files(self) -> dict[int, str]:
        out = {}
        for p in glob.glob(glob.escape(self.dump_stem) + "*"):
            rank = rank_of_file(p[len(self.dump_stem):])
            if rank is not None and p[len(self.dump_stem):].isdigit():
                out[rank] = p
        return out

    def dump(self, wait_s: float = DUMP_WAIT_S) -> dict:
        """Ask every rank for a dump and read what comes back: {"asked", "ranks", "mismatch", "collectives",
        "why"} (``why``: why there is nothing to judge, one line)."""
        before = {r: _mtime(p) for r, p in self._dump_files().items()}  # a dump that does not change is an old one
        self.dumps += 1
        poked = self.trigger()
        if not poked:
            return {"asked": 0, "ranks": [], "mismatch": None, "collectives": None,
                    "why": "no rank made a flight recorder pipe (not PyTorch with NCCL, or its monitoring is off)"}
        end = time.monotonic() + wait_s
        dumps: dict[int, dict] = {}
        bad: dict[int, str] = {}
        while True:  # until every rank asked has a dump that reads whole (one being written reads cut off)
            for r, p in self._dump_files().items():
                if r in dumps or _mtime(p) == before.get(r):
                    continue
                try:
                    with open(p, "rb") as f:
                        dumps[r] = load(f.read(MAX_DUMP_BYTES + 1))
                    bad.pop(r, None)
                except (OSError, DumpError) as exc:
                    bad[r] = f"rank {r}: {exc}"
            if len(dumps) >= poked or time.monotonic() >= end:
                break
            time.sleep(0.25)
        rates = [x for x in (collective_rate(d) for d in dumps.values()) if x]
        result = {"asked": poked, "ranks": sorted(dumps), "mismatch": first_mismatch(dumps) if dumps else None,
                  "collectives": max(rates, key=lambda x: x["count"]) if rates else None,
                  "why": None if dumps else f"{poked} rank(s) asked, no dump came within {wait_s:g} s",
                  "unreadable": [bad[r] for r in sorted(bad)]}
        with self._lock:
            self.latest, self.read_at = result, time.monotonic()
        return result

    def dump_async(self) -> bool:
        """:meth:`dump` on a thread of its own (one at a time); False when one is in flight."""
        with self._lock:
            if self._busy:
                return False
            self._busy = True

        def run():
            try:
                self.dump()
            finally:
                with self._lock:
                    self._busy = False

        threading.Thread(target=run, name="gputop-flight-recorder", daemon=True).start()
        return True

    def busy(self) -> bool:
        with self._lock:
            return self._busy

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
