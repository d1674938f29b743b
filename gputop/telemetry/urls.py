"""gputop's one rule for the network, in one place: the URL of ``--source KIND=URL`` (a dcgm-exporter's ``/metrics``,
a Prometheus server), checked once for both (:func:`source_url`); every request made with a whole-request deadline
(:func:`request`: connect, TLS, headers and body together, so a server that trickles a byte every second cannot hold
gputop past it); and what a server sends shown only as printable, truncated text (:func:`printable`).

Errors are the telemetry's (:mod:`gputop.telemetry.errors`): nothing answers, or no whole answer within the
deadline -> :class:`SourceUnreachable`; an answer that is not HTTP, or too large to be the metrics asked for ->
:class:`BadSource`.
"""

from __future__ import annotations

import http.client
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from gputop.telemetry.errors import BadSource, SourceUnreachable

MAX_ANSWER_BYTES = 256 << 20  # an answer larger than this is not metrics gputop asked for
SHOWN_CHARS = 120  # how much of a server's text a message quotes
_HOST = re.compile(r"^[A-Za-z0-9_.-]+$")


def printable(text, limit: int = SHOWN_CHARS) -> str:
    """A server's text as one printable line: control and other unprintable characters escaped (``\\x1b``,
    ``\\n``), cut to ``limit`` characters with ``…`` (``limit`` 0: not cut)."""
    text = str(text)
    if not text.isprintable():
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return text if not limit or len(text) <= limit else text[:limit - 1] + "…"


def source_url(spec: str, kind: str, example: str) -> tuple[str, urllib.parse.SplitResult]:
    """``--source KIND=URL`` -> the URL and its parts: an http(s) URL with a host and a valid port, printable ASCII
    without spaces (raises ValueError with one line naming ``example`` otherwise)."""
    given, sep, url = spec.partition("=")
    if given != kind or not sep:
        raise ValueError(f"--source takes {kind}=URL (got {printable(spec)!r})")
    odd = next((c for c in url if not (c.isascii() and c.isprintable()) or c.isspace()), None)
    if odd is not None:
        raise ValueError(f"--source {kind}=URL: the URL holds {'a space' if odd == ' ' else repr(odd)}, which a URL "
                         f"cannot (percent-encode it, %20 for a space) (got {printable(url)!r})")
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL"
        raise ValueError(f"--source {kind}=URL: {exc} (got {url!r})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--source {kind}=URL needs an http(s) URL such as {example} (got {url!r})")
    host = parts.hostname
    if not (_HOST.match(host) or (":" in host and _is_ip(host))):
        raise ValueError(f"--source {kind}=URL: {host!r} is not a host name or address (got {url!r})")
    try:
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        raise ValueError(f"--source {kind}=URL: bad port in {url!r}") from None
    return url, parts


def _is_ip(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host.split("%")[0])
        return True
    except ValueError:
        return False


# -- a request with a whole-request deadline -----------------------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    """A server's whole answer: its HTTP status and reason (printable) and its body."""

    status: int
    reason: str
    body: bytes


class _Deadline:
    """When the request must be over: at that moment every socket it opened is shut down (a read blocked on a
    server that trickles returns at once); ``expired`` says it happened. Holds a duplicate of each socket's
    descriptor, so that a socket closed and its number reused in between is never the one shut down."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.expired = False
        self._fds: list[int] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise socket.timeout("the deadline passed")
        return left

    def add(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._fds.append(os.dup(sock.fileno()))
            if self.expired:
                self._shut(self._fds[-1])
        return sock

    @staticmethod
    def _shut(fd: int) -> None:
        s = socket.socket(fileno=fd)
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            s.detach()

    def _fire(self) -> None:
        with self._lock:
            if self._fds is None:
                return
            self.expired = True
            for fd in self._fds:
                self._shut(fd)

    def close(self) -> None:
        self._timer.cancel()
        with self._lock:
            for fd in self._fds:
                os.close(fd)
            self._fds = None

    def connect(self, address, timeout=None, source_address=None, *args, **kwargs) -> socket.socket:
        """``socket.create_connection`` within the deadline: the name resolved on a thread that is waited for at
        most until the deadline (getaddrinfo takes no timeout), each address tried with what is left."""
        host, port = address[:2]
        found: list = []
        resolver = threading.Thread(target=lambda: found.append(_resolve(host, port)), daemon=True)
        resolver.start()
        resolver.join(self.left())
        if not found:
            raise socket.timeout(f"resolving {host} took longer than {self.seconds:g} s")
        infos = found[0]
        if isinstance(infos, Exception):
            raise infos
        error: OSError | None = None
        for family, kind, proto, _, addr in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(self.left())
                self.add(sock)
                if source_address:
                    sock.bind(source_address)
                sock.connect(addr)
                return sock
            except OSError as exc:
                error = exc
                sock.close()
        raise error or OSError(f"no address for {host}")


def _resolve(host: str, port: int):
    try:
        return socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    except OSError as exc:
        return exc


def _handlers(deadline: _Deadline, context) -> list:
    """urllib's HTTP and HTTPS handlers whose connections connect through ``deadline`` (proxies, redirects and
    TLS as urllib does them)."""
    def conn(base):
        class Connection(base):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self._create_connection = deadline.connect

        return Connection

    class HTTP(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(conn(http.client.HTTPConnection), req)

    class HTTPS(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(conn(http.client.HTTPSConnection), req, context=context)

    return [HTTP(), HTTPS(context=context)]


def _read(resp, deadline: _Deadline, max_bytes: int, url: str, what: str) -> bytes:
    chunks, total = [], 0
    while True:
        chunk = resp.read(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise BadSource(f"{url}: the answer is larger than {max_bytes >> 20} MiB: not {what}'s")
        deadline.left()


def request(url: str, what: str, *, deadline_s: float, data: bytes | None = None, headers: dict | None = None,
            method: str | None = None, context=None, max_bytes: int = MAX_ANSWER_BYTES,
            name: str | None = None) -> Answer:
    """``url``'s whole answer (any HTTP status) within ``deadline_s`` seconds from now: connect, TLS, headers and
    body. ``what``: the server's kind, for messages ("dcgm-exporter"); ``name``: how messages name the URL (default
    ``url`` itself). Raises SourceUnreachable (nothing answers, no whole answer in time) or BadSource (not HTTP, too
    large)."""
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    url = name or url
    deadline = _Deadline(deadline_s)
    late = SourceUnreachable(f"{url}: {what} sent no whole answer within {deadline_s:g} s (connect, headers and "
                             "body): too slow, or not answering")
    try:
        opener = urllib.request.build_opener(*_handlers(deadline, context))
        try:
            with opener.open(req, timeout=deadline_s) as resp:
                answer = Answer(resp.status, printable(resp.reason or "", 60), _read(resp, deadline, max_bytes, url,
                                                                                     what))
        except urllib.error.HTTPError as exc:  # an HTTP error status: its body too (Prometheus explains in it)
            with exc:
                answer = Answer(exc.code, printable(exc.reason or "", 60), _read(exc, deadline, max_bytes, url, what))
        if deadline.expired:  # the socket was shut under a read that then saw an end: not the whole answer
            raise late
        return answer
    except (BadSource, SourceUnreachable):
        raise
    except urllib.error.URLError as exc:
        if deadline.expired or isinstance(exc.reason, socket.timeout):
            raise late from None
        raise SourceUnreachable(f"{url}: cannot reach {what} ({printable(exc.reason)})") from None
    except http.client.RemoteDisconnected:
        raise (late if deadline.expired else SourceUnreachable(f"{url}: {what} closed the connection without "
                                                               "answering")) from None
    except http.client.HTTPException as exc:  # not HTTP (a bad status line, broken headers), or cut off by the deadline
        if deadline.expired:
            raise late from None
        raise BadSource(f"{url}: the answer is not well-formed HTTP ({type(exc).__name__}: {printable(exc, 80)}): "
                        f"is this {what}?") from None
    except (OSError, ValueError) as exc:  # timeouts, resets, a bad host name
        if deadline.expired or isinstance(exc, socket.timeout):
            raise late from None
        raise SourceUnreachable(f"{url}: cannot reach {what} ({printable(exc)})") from None
    finally:
        deadline.close()
