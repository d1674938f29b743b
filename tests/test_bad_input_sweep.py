"""A sweep of bad input a newcomer brings (issue 35: at least 60, none of them the issue's own list), each with the
README's exit code ("Exit codes"), one line on stderr, no traceback, and with --json exactly one document.

Every case is a real ``python -m gputop`` on a machine where NVML sees no GPU (tests/no_pynvml first on the path,
so the codes are the same on a GPU machine), with real files, real servers in this process and real environment
variables. A case is (argv, expected exit code, a few words the line must hold); ``{tmp}`` is a folder of its own,
``{trace:NAME}`` a file made by :data:`TRACES`, ``{url:NAME}`` a server answering as :data:`ANSWERS` says."""

from __future__ import annotations

import codecs
import gzip
import json
import os
import socketserver
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fault_util import ROOT, env
from quick_util import first_of_each

NO_PYNVML = Path(__file__).resolve().parent / "no_pynvml"
DEMO = ROOT / "gputop" / "data" / "demo.jsonl.gz"
PY = sys.executable
HEADER = '{"type":"header","format":"gputop-trace","version":1,"devices":[{"index":0,"name":"X"}]}'
TICK = '{"type":"tick","t":%s,"gpus":[{"index":0,"t":%s,"sm_active_pct":50.0}],"host":{}}'


def _two_members() -> bytes:
    return DEMO.read_bytes() + gzip.compress(b"\x00garbage that is not a trace\n")


TRACES = {  # NAME -> the file's bytes
    "version-as-text": (HEADER.replace('"version":1', '"version":"1"') + "\n" + TICK % (0, 0) + "\n").encode(),
    "array-line": b"[]\n[]\n",
    "null-line": b"null\n",
    "long-line": b"a" * (2 << 20),
    "utf16": codecs.BOM_UTF16_LE + (HEADER + "\n").encode("utf-16-le"),
    "gzip-text": gzip.compress(b"hello world\nthis is not a trace\n"),
    "gzip-binary": gzip.compress(bytes(range(256)) * 64),
    "two-gzip-members": None,  # _two_members(): a trace and then a member of garbage
    "bom": codecs.BOM_UTF8 + (HEADER + "\n" + TICK % (0, 0) + "\n").encode(),
    "no-devices-list": ('{"type":"header","format":"gputop-trace","version":1,"devices":{"0":1}}\n'
                        + TICK % (0, 0) + "\n").encode(),
    "tick-more-gpus-than-devices": (HEADER + "\n" + TICK.replace('"gpus":[', '"gpus":[{"index":1,"t":0},') % (0, 0)
                                    + "\n").encode(),
    "tick-no-gpus": (HEADER + "\n" + '{"type":"tick","t":0,"gpus":[],"host":{}}' + "\n").encode(),
    "tick-t-nan": (HEADER + "\n" + TICK % ("NaN", 0) + "\n").encode(),
    "header-only-gz": gzip.compress((HEADER + "\n").encode()),
    "empty-gz": gzip.compress(b""),
    "blank-lines": b"\n\n\n",
    "sample-nan": (HEADER + "\n" + (TICK % (0, 0)).replace("50.0", "NaN") + "\n" + TICK % (0.1, 0.1) + "\n").encode(),
}


class Answer(socketserver.BaseRequestHandler):
    """Answers every request with the bytes :data:`ANSWERS` holds for the server's name."""

    body = b""

    def handle(self):
        try:
            self.request.recv(65536)
            self.request.sendall(self.body)
        except OSError:
            pass


def _http(status: str, body: bytes, ctype: str = "text/plain") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            .encode() + body)


ANSWERS = {  # NAME -> what the server sends
    "404": _http("404 Not Found", b"no such page"),
    "500": _http("500 Internal Server Error", b"boom"),
    "empty-200": _http("200 OK", b""),
    "html": _http("200 OK", b"<html><body>Grafana</body></html>", "text/html"),
    "json-not-api": _http("200 OK", b'{"hello": "world"}', "application/json"),
    "json-error": _http("200 OK", b'{"status":"error","errorType":"timeout","error":"query timed out"}',
                        "application/json"),
    "closes": b"",
    "not-http": b"220 smtp.example.com ESMTP ready\r\n",
    "prom-text-no-dcgm": _http("200 OK", b"# TYPE up gauge\nup 1\n"),
    "dcgm-mig-only": _http("200 OK", b'DCGM_FI_DEV_GPU_UTIL{gpu="0",GPU_I_ID="1"} 5\n'),
    "bad-chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nxx\r\n",
}


# (id, argv, exit code, words the one line holds, extra environment)
CASES = [
    # -- flags and their values -------------------------------------------------------------------------------------
    ("rate-zero", ["--once", "--demo", "--rate", "0"], 2, "--rate must be between", {}),
    ("rate-nan", ["--once", "--demo", "--rate", "nan"], 2, "--rate must be between", {}),
    ("rate-inf", ["--once", "--demo", "--rate", "inf"], 2, "--rate must be between", {}),
    ("rate-word", ["--once", "--demo", "--rate", "fast"], 2, "invalid float value", {}),
    ("speed-negative", ["--once", "--demo", "--speed", "-1"], 2, "--speed must be > 0", {}),
    ("speed-nan", ["--once", "--demo", "--speed", "nan"], 2, "--speed must be > 0", {}),
    ("seconds-zero", ["--record", "{tmp}/x.jsonl", "--seconds", "0"], 2, "--seconds must be > 0", {}),
    ("seconds-negative-watch", ["--watch", "1", "--seconds", "-5"], 2, "--seconds must be > 0", {}),
    ("timeout-nan", ["--run", "fault_ok", "--device", "cpu", "--timeout", "nan"], 2, "--timeout must be > 0", {}),
    ("grace-negative", ["--run", "fault_ok", "--device", "cpu", "--grace", "-1"], 2, "--grace must be >= 0", {}),
    ("gpu-negative", ["--once", "--demo", "--gpu", "-1"], 2, "--gpu takes an NVML index >= 0", {}),
    ("gpu-absent", ["--once", "--demo", "--gpu", "9"], 2, "--gpu 9: no such GPU", {}),
    ("gpu-word", ["--once", "--demo", "--gpu", "first"], 2, "invalid int value", {}),
    ("watch-zero", ["--watch", "0"], 2, "--watch 0: no such process", {}),
    ("watch-huge", ["--watch", "2147483647"], 2, "no such process", {}),
    ("watch-word", ["--watch", "me"], 2, "invalid int value", {}),
    ("run-path", ["--run", "../../etc/passwd"], 2, "../../etc/passwd", {}),
    ("param-no-value", ["--run", "fault_ok", "--device", "cpu", "--param"], 2, "expected one argument", {}),
    ("param-no-name", ["--run", "fault_ok", "--device", "cpu", "--param", "=5"], 2, "unknown parameter ''", {}),
    ("param-empty-value", ["--run", "fault_ok", "--device", "cpu", "--param", "sleep="], 2, "sleep", {}),
    ("param-word", ["--run", "fault_ok", "--device", "cpu", "--param", "k=many"], 2, "k", {}),
    ("param-below-range", ["--run", "fault_ok", "--device", "cpu", "--param", "k=0"], 2, "k", {}),
    ("param-unknown", ["--run", "fault_ok", "--device", "cpu", "--param", "speed=3"], 2, "speed", {}),
    ("param-huge", ["--run", "fault_ok", "--device", "cpu", "--param", "sleep=1e99"], 2, "sleep", {}),
    ("param-bad-choice", ["--run", "fault_ok", "--param", "device=tpu"], 2, "device", {}),
    ("device-tpu", ["--run", "fault_ok", "--device", "tpu"], 2, "invalid choice", {}),
    ("export-port-high", ["--export", "70000", "--demo"], 2, "the port must be a number from 1 to 65535", {}),
    ("export-word", ["--export", "metrics", "--demo"], 2, "the port must be a number", {}),
    ("export-colon", ["--export", ":", "--demo"], 2, "no host before ':'", {}),
    ("export-bad-ipv6", ["--export", "[zz]:9400", "--demo"], 2, "is not an IPv6 address", {}),
    ("export-foreign-address", ["--export", "192.0.2.1:9400", "--demo"], 2, "cannot listen on 192.0.2.1:9400", {}),
    ("serve-word-port", ["--serve", "127.0.0.1:web", "--demo"], 2, "the port must be a number", {}),
    ("emptyname-replay", ["--replay", "", "--json"], 2, "--replay needs a file name (got an empty one)", {}),
    ("emptyname-output", ["--once", "--demo", "--json", "-o", ""], 2, "needs a file name (got an empty one)", {}),
    ("emptyname-record", ["--record", "", "--seconds", "1"], 2, "--record needs a file name", {}),
    ("range-zero", ["--once", "--source", "prometheus=http://127.0.0.1:9", "--range", "0s"], 2, "above 0", {}),
    ("range-word", ["--once", "--source", "prometheus=http://127.0.0.1:9", "--range", "forever"], 2, "a unit", {}),
    ("range-negative", ["--once", "--source", "prometheus=http://127.0.0.1:9", "--range=-5m"], 2, "above 0", {}),
    ("range-missing", ["--once", "--source", "prometheus=http://127.0.0.1:9", "--range"], 2, "expected one argument",
     {}),
    ("class-without-cluster", ["--once", "--demo", "--class", "idle"], 2, "go with --source prometheus=URL", {}),
    ("source-no-url", ["--once", "--source", "dcgm-exporter"], 2, "--source takes dcgm-exporter=URL", {}),
    ("source-empty-url", ["--once", "--source", "prometheus="], 2, "needs an http(s) URL", {}),
    ("source-unknown-kind", ["--once", "--source", "nvml=http://127.0.0.1:9"], 2, "--source takes dcgm-exporter=URL",
     {}),
    ("source-credentials", ["--once", "--source", "prometheus=http://me:secret@127.0.0.1:9"], 2, "no credentials", {}),
    ("source-query", ["--once", "--source", "prometheus=http://127.0.0.1:9/?x=1"], 2, "without ?query", {}),
    ("source-with-demo", ["--once", "--demo", "--source", "dcgm-exporter=http://127.0.0.1:9/m"], 2, "two sources", {}),
    ("profile-seconds-zero", ["--profile", "--profile-seconds", "0", "--run", "--", "true"], 2,
     "--profile-seconds goes with --profile and must be > 0", {}),
    ("profile-steps-negative", ["--profile", "--profile-steps", "-1", "--run", "--", "true"], 2,
     "--profile-steps goes with --profile", {}),
    ("rate-tiny", ["--once", "--demo", "--rate", "1e-9"], 2, "--rate must be between", {}),
    # -- files ------------------------------------------------------------------------------------------------------
    ("output-empty-name", ["--once", "--demo", "-o", ""], 2, "--output needs a file name", {}),
    ("output-root", ["--once", "--demo", "-o", "/"], 2, "is a folder", {}),
    ("output-no-folder", ["--once", "--demo", "-o", "{tmp}/no/such/x.json"], 2, "no such folder", {}),
    ("csv-folder", ["--run", "fault_ok", "--device", "cpu", "--csv", "{tmp}"], 2, "is a folder", {}),
    ("record-run-folder", ["--run", "fault_ok", "--device", "cpu", "--record-run", "{tmp}"], 2, "is a folder", {}),
    ("log-no-folder", ["--log", "{tmp}/none/x.log", "--run", "--", "true"], 2, "no such folder", {}),
    ("replay-symlink-loop", ["--replay", "{tmp}/loop", "--json"], 2, "cannot read", {}),
    ("replay-proc-text", ["--replay", "/proc/self/status", "--json"], 2, "line 1 is not JSON", {}),
    ("replay-version-as-text", ["--replay", "{trace:version-as-text}", "--json"], 2, "version '1' is not supported",
     {}),
    ("replay-array", ["--replay", "{trace:array-line}", "--json"], 2, "not a gputop trace", {}),
    ("replay-null", ["--replay", "{trace:null-line}", "--once"], 2, "not a gputop trace", {}),
    ("replay-long-line", ["--replay", "{trace:long-line}", "--json"], 2, "line 1 is not JSON", {}),
    ("replay-utf16", ["--replay", "{trace:utf16}", "--json"], 2, "not", {}),
    ("replay-gzip-text", ["--replay", "{trace:gzip-text}", "--json"], 2, "line 1 is not JSON", {}),
    ("replay-gzip-binary", ["--replay", "{trace:gzip-binary}", "--json"], 2, "line 1", {}),
    ("replay-two-gzip-members", ["--replay", "{trace:two-gzip-members}", "--json"], 2, "not JSON", {}),
    ("replay-bom", ["--replay", "{trace:bom}", "--once"], 0, "", {}),
    ("replay-devices-not-list", ["--replay", "{trace:no-devices-list}", "--json"], 2, "not a list of GPUs", {}),
    ("replay-more-gpus-than-devices", ["--replay", "{trace:tick-more-gpus-than-devices}", "--json"], 2,
     "more GPU samples than the header's devices", {}),
    ("replay-fewer-gpus-than-devices", ["--replay", "{trace:tick-no-gpus}", "--json"], 2,
     "has 0 GPU samples where the header's devices are 1", {}),
    ("replay-t-nan", ["--replay", "{trace:tick-t-nan}", "--json"], 2, "has no time t", {}),
    ("replay-header-only-gz", ["--replay", "{trace:header-only-gz}", "--json"], 2, "the trace has no samples", {}),
    ("replay-empty-gz", ["--replay", "{trace:empty-gz}", "--json"], 2, "empty file", {}),
    ("replay-blank-lines", ["--replay", "{trace:blank-lines}", "--once"], 2, "empty file", {}),
    ("replay-sample-nan", ["--replay", "{trace:sample-nan}", "--once", "--json"], 0, "", {}),
    ("recorded-a-trace", ["--demo", "--recorded", str(DEMO)], 2, "not a recorded run", {}),
    # -- commands ---------------------------------------------------------------------------------------------------
    ("command-not-executable", ["--run", "--", "{tmp}/plain.txt"], 2, "plain.txt (not executable", {}),
    ("command-exec-format", ["--run", "--", "{tmp}/garbage.bin"], 2, "(Exec format error)", {}),
    ("command-a-folder", ["--run", "--", "/tmp"], 2, "/tmp (a folder)", {}),
    ("command-empty", ["--run", "--", ""], 2, "command not found: ''", {}),
    ("command-nothing", ["--run", "--"], 2, "--run needs a workload NAME", {}),
    # -- servers ----------------------------------------------------------------------------------------------------
    ("dcgm-404", ["--once", "--source", "dcgm-exporter={url:404}/metrics"], 3, "HTTP 404 Not Found", {}),
    ("dcgm-500-json", ["--once", "--json", "--source", "dcgm-exporter={url:500}/metrics"], 3, "HTTP 500", {}),
    ("dcgm-empty", ["--once", "--source", "dcgm-exporter={url:empty-200}/metrics"], 2, "has no DCGM_FI_* GPU metrics",
     {}),
    ("dcgm-html", ["--once", "--source", "dcgm-exporter={url:html}/metrics"], 2, "not Prometheus text", {}),
    ("dcgm-closes", ["--once", "--source", "dcgm-exporter={url:closes}/metrics"], 3,
     "closed the connection without answering", {}),
    ("dcgm-not-http", ["--once", "--source", "dcgm-exporter={url:not-http}/metrics"], 2,
     "the answer is not well-formed HTTP", {}),
    ("dcgm-no-dcgm-series", ["--once", "--source", "dcgm-exporter={url:prom-text-no-dcgm}/metrics"], 2,
     "has no DCGM_FI_* GPU metrics", {}),
    ("dcgm-mig-only", ["--once", "--source", "dcgm-exporter={url:dcgm-mig-only}/metrics"], 2,
     "has no DCGM_FI_* GPU metrics", {}),
    ("dcgm-bad-chunked", ["--once", "--source", "dcgm-exporter={url:bad-chunked}/metrics"], 2, "not well-formed HTTP",
     {}),
    ("dcgm-https-to-http", ["--once", "--source", "dcgm-exporter=https://{hostport:html}/metrics"], 3, "cannot reach",
     {}),
    ("prom-html", ["--once", "--source", "prometheus={url:html}"], 2, "not Prometheus' HTTP API", {}),
    ("prom-json-not-api", ["--once", "--json", "--source", "prometheus={url:json-not-api}"], 2,
     "not Prometheus' HTTP API", {}),
    ("prom-query-error", ["--once", "--source", "prometheus={url:json-error}"], 3, "query timed out", {}),
    ("prom-500", ["--once", "--source", "prometheus={url:500}"], 3, "HTTP 500", {}),
    ("prom-token-file-missing", ["--once", "--source", "prometheus={url:html}"], 2,
     "GPUTOP_PROMETHEUS_TOKEN_FILE=/no/such/token: cannot read it", {"GPUTOP_PROMETHEUS_TOKEN_FILE": "/no/such/token"}),
    ("prom-token-and-user", ["--once", "--source", "prometheus={url:html}"], 2, "not both",
     {"GPUTOP_PROMETHEUS_TOKEN": "t", "GPUTOP_PROMETHEUS_USER": "u"}),
    ("prom-user-without-password", ["--once", "--source", "prometheus={url:html}"], 2, "needs both",
     {"GPUTOP_PROMETHEUS_USER": "u"}),
    ("prom-ca-not-pem", ["--once", "--source", "prometheus=https://{hostport:html}"], 2, "not a readable CA bundle",
     {"GPUTOP_PROMETHEUS_CA_FILE": "/etc/hostname"}),
]


def test_the_sweep_is_at_least_sixty_inputs():
    assert len(CASES) >= 60 and len({c[0] for c in CASES}) == len(CASES)


@pytest.fixture(scope="module")
def servers():
    out, running = {}, []
    for name, body in ANSWERS.items():
        handler = type(f"Answer_{name}", (Answer,), {"body": body})
        socketserver.ThreadingTCPServer.allow_reuse_address = True
        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # shutdown() within 50 ms
        running.append(server)
        out[name] = f"127.0.0.1:{server.server_address[1]}"
    yield out
    for server in running:
        server.shutdown()
        server.server_close()


def _filled(argv: list[str], tmp_path: Path, servers: dict) -> list[str]:
    out = []
    for word in argv:
        word = word.replace("{tmp}", str(tmp_path))
        for name, hostport in servers.items():
            word = word.replace("{url:%s}" % name, f"http://{hostport}").replace("{hostport:%s}" % name, hostport)
        if word.startswith("{trace:"):
            name = word[len("{trace:"):-1]
            path = tmp_path / f"{name}.trace"
            path.write_bytes(TRACES[name] if TRACES[name] is not None else _two_members())
            word = str(path)
        out.append(word)
    return out


# the quick loop runs the first case of each family (the word before the first "-"), the full suite every case
@pytest.mark.parametrize("name, argv, code, words, extra", first_of_each(CASES, lambda c: c[0].split("-")[0],
                                                                       ids=lambda c: c[0]))
def test_bad_input(tmp_path, servers, name, argv, code, words, extra):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "plain.txt").write_text("echo hello\n")
    (tmp_path / "garbage.bin").write_bytes(b"\x00\x01garbage")
    (tmp_path / "garbage.bin").chmod(0o755)
    argv = _filled(argv, tmp_path, servers)
    e = env(**extra)
    e["PYTHONPATH"] = os.pathsep.join([str(NO_PYNVML), e["PYTHONPATH"]])
    r = subprocess.run([PY, "-m", "gputop", *argv], cwd=tmp_path, env=e, capture_output=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    stderr = r.stderr.decode("utf-8", "replace")
    assert r.returncode == code, (r.returncode, stderr[-1500:])
    assert "Traceback" not in stderr, stderr[-3000:]
    if code:
        lines = stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("gputop: ") and words in lines[0], stderr[-1500:]
        assert lines[0].isprintable(), repr(lines[0])
    if "--json" in argv:
        doc = json.loads(r.stdout)  # exactly one document
        assert doc["exit_code"] == code
