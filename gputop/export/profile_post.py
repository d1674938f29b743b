"""``POST /profile?pid=N[&seconds=S]`` on ``--export``'s port: a profiler window asked of a running process (one
started with gputop's loader: ``gputop --profile-env``), served beside ``/metrics`` on the same address (127.0.0.1
unless told otherwise). The window then shows in the ``gputop_attribution_*`` series of ``/metrics``.

Asking costs the process some throughput, so it needs the exporter's token: ``Authorization: Bearer TOKEN``, where
TOKEN is the one line of the file the exporter writes at its start in the user's private profile folder (mode 0600:
``<profile base>/export-PORT.token``, said on stderr), readable only by the user the exporter runs as (who may ask
their own processes anyway)::

    curl -X POST -H "Authorization: Bearer $(cat /tmp/gputop-$UID/profile/export-9400.token)" \\
        "http://127.0.0.1:9400/profile?pid=1234"

Answers, JSON ``{"asked": bool, "message": one line}``: 202 asked; 400 a bad ``pid``/``seconds``; 401 no or a wrong
token; 404 the process cannot be asked (none, not Python, not prepared: how to prepare it); 409 one of its windows
is still being recorded; 405 another method.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from urllib.parse import parse_qs

from gputop.runner.profile_loader import protocol as P
from gputop.session.profile_on_demand import OnDemand

PATH = "/profile"


def write_token(port: int) -> tuple[str, str]:
    """(token, its file): a new token, written 0600 in the user's private profile folder (OSError/Refused pass)."""
    token = secrets.token_urlsafe(24)
    path = os.path.join(P.make_base(), f"export-{port}.token")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token, path


def app(on_demand: OnDemand, token: str, holders):
    """The WSGI app of ``POST /profile``; ``holders()``: the pids on the GPUs now (NVML's list)."""

    def answer(start_response, status: str, asked: bool, message: str):
        start_response(status, [("Content-Type", "application/json")])
        return [json.dumps({"asked": asked, "message": message}).encode() + b"\n"]

    def handle(environ, start_response):
        if environ.get("REQUEST_METHOD") != "POST":
            return answer(start_response, "405 Method Not Allowed", False, "POST /profile?pid=N asks for a window")
        given = (environ.get("HTTP_AUTHORIZATION") or "").removeprefix("Bearer ").strip()
        if not given or not hmac.compare_digest(given.encode(), token.encode()):
            return answer(start_response, "401 Unauthorized", False,
                          "POST /profile needs the exporter's token: Authorization: Bearer TOKEN (its file is named "
                          "on the exporter's stderr)")
        query = parse_qs(environ.get("QUERY_STRING") or "")
        try:
            pid = int(query["pid"][0])
            seconds = float(query["seconds"][0]) if "seconds" in query else None
            if pid <= 0 or (seconds is not None and not 0 < seconds <= 60):
                raise ValueError
        except (KeyError, ValueError, IndexError):
            return answer(start_response, "400 Bad Request", False,
                          "POST /profile?pid=N[&seconds=S]: a process id, and a window of 0-60 s")
        ok, line = on_demand.ask(pid, holders(), seconds)
        if ok:
            return answer(start_response, "202 Accepted", True, line)
        return answer(start_response, "409 Conflict" if "still being recorded" in line else "404 Not Found", False,
                      line)

    return handle
