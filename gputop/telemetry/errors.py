"""Why a telemetry source cannot be opened or read: one exception class per cause, one line of text each.

They carry no exit code: telemetry is the base layer and does not know how a frontend ends. The frontends
map each class to theirs through :func:`gputop.exitcodes.code_for` (2 for bad input, 3 where there is no GPU
or nothing answers at a URL), so the mapping is written once.
"""

from __future__ import annotations


class SourceError(Exception):
    """A source that cannot be opened or read; ``str()`` is one line that says why and names the input."""


class BadSource(SourceError):
    """The source asked for is wrong as given: a trace that cannot be read, a ``--gpu`` that is not there, a URL
    that answers with something other than the metrics text expected (a usage error)."""


class NoGpu(SourceError):
    """No NVML library, no driver or no GPU, for a mode that needs live GPU data."""


class SourceUnreachable(SourceError):
    """Nothing answers at the source's URL: refused, timed out, or an HTTP error."""


class QueryFailed(SourceUnreachable):
    """A Prometheus server (``--source prometheus=URL``) answered ``"status": "error"``: the query failed there
    (too many samples, a timeout). The source cannot give the data: the exit code of one that does not answer."""
