"""What a frontend reads of a workload run, live (:class:`~gputop.runner.workload_run.WorkloadRun`) or
played back from a recording (:class:`~gputop.runner.recording.RecordedRun`): one home for both, and the
part of the :class:`~gputop.runner.run.Run` protocol they share (``poll``, ``wait``, ``document``).

A class that mixes this in holds ``events`` (a :class:`~gputop.runner.events.RunEvents`), ``ticks`` with
its ``_ticks_lock``, ``_finished`` (set once the final document is built) and ``_final_doc``.
"""

from __future__ import annotations

import copy


class RunView:
    @property
    def points(self) -> list[dict]:
        with self.events.lock:
            return list(self.events.points)

    @property
    def progress(self) -> dict | None:
        return self.events.progress

    def ticks_copy(self) -> list[dict]:
        with self._ticks_lock:
            return list(self.ticks)

    @property
    def finished(self) -> bool:
        """True once the run is over and its final document built."""
        return self._finished.is_set()

    def poll(self) -> bool:
        return self._finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the run is over and its document built; False if ``timeout`` passed first."""
        return self._finished.wait(timeout)

    def document(self) -> dict:
        """The run document: final once finished (after ``analyze``), else a partial one."""
        if self._final_doc is not None:
            return copy.deepcopy(self._final_doc)
        from gputop.runner.document import build_document

        return build_document(self)
