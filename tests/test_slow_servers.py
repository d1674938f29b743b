"""The network rule (issue 35 items 3 and 6): every request gputop makes has a whole-request deadline (connect,
headers and body), so a server that trickles bytes cannot hold it; a URL that is not one is exit 2 before anything
is asked; what a server sends is never shown raw (printable, cut). Real servers in this process (a socket server
that drips its answer a byte at a time, one that never answers, one that answers garbage) and real ``python -m
gputop`` processes."""

from __future__ import annotations

import socketserver
import threading
import time

import pytest

from export_util import free_port
from fault_util import Terminal, env, plain
from gputop.telemetry import dcgm
from gputop.telemetry.errors import BadSource, SourceUnreachable
from gputop.telemetry.prometheus import TIMEOUT_S, PrometheusClient
from gputop.telemetry.urls import printable, request
from io_util import RUN_S, gputop, one_document, one_line
from quick_util import only

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"
GARBAGE = (b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + b"\x1b[2J\x1b]0;pwned\x07" +
           bytes(range(1, 32)) * 4 + b"DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} not-a-number\x1b[31m" * 4 + b"\n")


class Server:
    """A TCP server on 127.0.0.1 that answers every connection with ``behaviour(conn, stop)``; counts the bytes
    it sent. ``stop`` ends every answer in progress (the test is over)."""

    def __init__(self, behaviour):
        outer = self
        self.sent = 0
        self.stop = threading.Event()

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                try:
                    self.request.recv(65536)  # the request (its first segment is enough here)
                    behaviour(self.request, outer)
                except OSError:  # the client gave up: what gputop should do
                    pass

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def send(self, conn, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


def drip_body(every: float):
    """Headers at once, then the body a byte every ``every`` seconds, for ever."""
    def behaviour(conn, server):
        server.send(conn, HEAD)
        while not server.stop.wait(every):
            server.send(conn, b"#")
    return behaviour


def drip_headers(every: float):
    """The status line and headers a byte every ``every`` seconds (the headers never end)."""
    def behaviour(conn, server):
        for b in (HEAD[:-2] + b"X-Slow: " + b"y" * 100000):
            if server.stop.wait(every):
                return
            server.send(conn, bytes([b]))
    return behaviour


def silent(conn, server):
    server.stop.wait()


def answer(data: bytes):
    def behaviour(conn, server):
        server.send(conn, data)
    return behaviour


@pytest.fixture
def serve():
    servers = []

    def start(behaviour) -> Server:
        servers.append(Server(behaviour))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def bounded(fn, within: float = RUN_S):
    """``fn()``'s result or exception, from a thread that must end within ``within`` s (a hang fails the test
    instead of holding the suite)."""
    out: list = []

    def call():
        try:
            out.append(("ok", fn()))
        except Exception as exc:  # noqa: BLE001 (handed to the test)
            out.append(("raised", exc))

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(within)
    assert out, f"still waiting after {within:g} s: the deadline did not hold"
    return out[0]


@pytest.mark.parametrize("behaviour", [drip_body(0.05), pytest.param(drip_headers(0.05), marks=pytest.mark.slow),
                                       pytest.param(silent, marks=pytest.mark.slow)], ids=["body", "headers", "silent"])
def test_a_request_ends_at_its_deadline_however_the_server_trickles(serve, behaviour):
    """The server sends a byte every 50 ms: a deadline per read (the old socket timeout) would never pass; the
    whole request's deadline does, and the bytes that came before it prove the trickle was going."""
    server = serve(behaviour)
    deadline = 1.0
    t0 = time.monotonic()
    how, exc = bounded(lambda: request(server.url + "/metrics", "dcgm-exporter", deadline_s=deadline))
    took = time.monotonic() - t0
    assert how == "raised" and isinstance(exc, SourceUnreachable), exc
    assert "no whole answer within 1 s" in str(exc)
    assert took >= deadline  # it waited for the deadline, not less
    if behaviour is not silent:
        assert server.sent > 5  # bytes kept coming: each read alone would have been answered in time


def test_a_whole_answer_within_the_deadline_is_read_whole(serve):
    body = b"x" * 300000
    server = serve(answer(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body))
    got = request(server.url, "dcgm-exporter", deadline_s=30)
    assert got.status == 200 and got.body == body


def test_an_answer_larger_than_metrics_is_refused_not_read_for_ever(serve):
    def endless(conn, server):
        server.send(conn, b"HTTP/1.0 200 OK\r\n\r\n")
        while not server.stop.is_set():
            server.send(conn, b"DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 1\n" * 1000)

    server = serve(endless)
    how, exc = bounded(lambda: request(server.url, "dcgm-exporter", deadline_s=60, max_bytes=1 << 20))
    assert how == "raised" and isinstance(exc, BadSource) and "larger than 1 MiB" in str(exc)


def test_an_answer_that_is_not_http_is_bad_source_said_printable(serve):
    server = serve(answer(b"SSH-2.0-OpenSSH_9.6\x1b[2J\r\n" + b"\x00" * 200))
    how, exc = bounded(lambda: request(server.url, "dcgm-exporter", deadline_s=30))
    assert how == "raised" and isinstance(exc, BadSource) and "not well-formed HTTP" in str(exc)
    assert str(exc).isprintable() and len(str(exc)) < 300


def test_printable_escapes_and_cuts():
    assert printable("ok") == "ok"
    assert printable("a\x1b[2Jb\n") == "a\\x1b[2Jb\\n"
    assert printable("x" * 500, 20) == "x" * 19 + "…"
    assert printable("\x00" * 500, 0) == "\\x00" * 500


def test_prometheus_keeps_no_raw_control_character_from_its_answers(serve):
    body = b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"Hostname":"n\\u001b[2J"},' \
           b'"value":[1,"1"]}]}}'
    server = serve(answer(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body))
    rows = PrometheusClient(server.url).query("up")
    assert rows[0]["metric"]["Hostname"] == "n\\x1b[2J"


def test_prometheus_error_text_is_shown_printable_and_cut(serve):
    body = b'{"status":"error","errorType":"bad_data","error":"\\u001b]0;pwned\\u0007' + b"z" * 400 + b'"}'
    server = serve(answer(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n" % len(body) + body))
    with pytest.raises(SourceUnreachable) as exc:
        PrometheusClient(server.url).query("up")
    assert str(exc.value).isprintable() and "\\x1b]0;pwned" in str(exc.value) and len(str(exc.value)) < 300


def test_a_dcgm_exporter_answering_garbage_is_one_printable_line(serve):
    server = serve(answer(GARBAGE))
    with pytest.raises(BadSource) as exc:
        dcgm.DcgmExporterSource(server.url + "/metrics")
    assert str(exc.value).isprintable() and len(str(exc.value)) < 250
    r = gputop("--once", "--source", f"dcgm-exporter={server.url}/metrics")
    line = one_line(r, 2, server.url)
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr and len(line) < 250


# -- the command line ----------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("json_mode", [False, True], ids=["text", "json"])
def test_once_on_a_prometheus_that_drips_ends_at_the_deadline(serve, json_mode):
    server = serve(drip_body(2.0))
    r = gputop("--once", "--source", f"prometheus={server.url}", *(["--json"] if json_mode else []))
    one_line(r, 3, f"no whole answer within {TIMEOUT_S:g} s")
    if json_mode:
        assert one_document(r)["exit_code"] == 3


@pytest.mark.slow
@pytest.mark.parametrize("behaviour", [drip_body(2.0), drip_headers(1.0)], ids=["body", "headers"])
def test_once_on_a_dcgm_exporter_that_drips_ends_at_the_deadline(serve, behaviour):
    server = serve(behaviour)
    r = gputop("--once", "--json", "--source", f"dcgm-exporter={server.url}/metrics")
    one_line(r, 3, f"no whole answer within {dcgm.FETCH_TIMEOUT_S:g} s")
    assert one_document(r)["exit_code"] == 3


@pytest.mark.slow
def test_the_monitor_on_a_dcgm_exporter_that_drips_says_one_line_on_a_real_terminal(serve):
    server = serve(drip_body(2.0))
    term = Terminal(["--source", f"dcgm-exporter={server.url}/metrics"], env())
    try:
        code = term.wait(RUN_S)
        text = plain(term.output())
    finally:
        term.close()
    assert code == 3 and "Traceback" not in text, text[-2000:]
    assert "no whole answer within" in text


@pytest.mark.parametrize("url", only([  # the quick loop: a space and an escape; the full suite: every URL
    "http://a b/metrics", "http://host/pa th", "http://h\u00f6st:9400/metrics", "http://host/\x1b[2J",
    "http://host:99999/metrics", "http://[::1/metrics", "http://a<b/metrics", "ftp://host/metrics", "http://",
], lambda url: url in ("http://a b/metrics", "http://host/\x1b[2J")))
@pytest.mark.parametrize("kind", ["dcgm-exporter", "prometheus"])
def test_a_url_that_is_not_one_is_exit_2_before_anything_is_asked(kind, url):
    """Each is one line and exit 2 (the README's code for a --source that is not KIND=http(s)://...), shown
    printable, and with --json (--once) one document."""
    r = gputop("--once", "--json", "--source", f"{kind}={url}")
    line = one_line(r, 2, f"--source {kind}=URL")
    assert "\x1b" not in line
    assert one_document(r)["exit_code"] == 2


def test_a_port_nothing_listens_on_is_exit_3_at_once():
    port = free_port()
    one_line(gputop("--once", "--source", f"dcgm-exporter=http://127.0.0.1:{port}/metrics"), 3, "cannot reach")
