"""A Prometheus server's HTTP API as a telemetry source: ``gputop --source prometheus=URL``.

Where a fleet's nodes run ``gputop --export`` or NVIDIA's dcgm-exporter, their Prometheus already holds every
GPU's counters (and gputop's verdicts). :class:`PrometheusClient` asks it through the three read endpoints
gputop needs, with the standard library only: ``/api/v1/query`` (an instant vector), ``/api/v1/query_range``
(a matrix), ``/api/v1/series`` (which series exist) and ``/api/v1/label/NAME/values`` (a label's values, from
the index alone). ``fleet/reader.py`` turns the answers into the
cluster's rows; this module knows HTTP and Prometheus' envelope, nothing of GPUs.

Access. A secret never goes on the command line (where ``ps`` shows it) nor in the URL: it comes from the
environment or a file named there (:data:`ENV`): a bearer token (``GPUTOP_PROMETHEUS_TOKEN`` or
``GPUTOP_PROMETHEUS_TOKEN_FILE``) or basic auth (``GPUTOP_PROMETHEUS_USER`` with ``GPUTOP_PROMETHEUS_PASSWORD``
or ``GPUTOP_PROMETHEUS_PASSWORD_FILE``). TLS is verified against the system's CAs, or the bundle in
``GPUTOP_PROMETHEUS_CA_FILE``; there is no switch that turns verification off.

Errors (each one line; ``gputop.exitcodes.code_for`` maps them): nothing answers, an HTTP error, refused
credentials -> :class:`SourceUnreachable` (3); an answer that is not Prometheus' JSON envelope ->
:class:`BadSource` (2); Prometheus answers ``"status": "error"`` -> :class:`QueryFailed` (3).
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import urllib.parse

from gputop.telemetry.errors import BadSource, QueryFailed, SourceUnreachable
from gputop.telemetry.urls import printable, request, source_url

KIND = "prometheus"
TIMEOUT_S = 10.0  # each request, whole: connect, TLS, headers and body
ENV = {  # what each environment variable holds
    "GPUTOP_PROMETHEUS_TOKEN": "a bearer token",
    "GPUTOP_PROMETHEUS_TOKEN_FILE": "a file holding the bearer token",
    "GPUTOP_PROMETHEUS_USER": "the basic-auth user",
    "GPUTOP_PROMETHEUS_PASSWORD": "the basic-auth password",
    "GPUTOP_PROMETHEUS_PASSWORD_FILE": "a file holding the basic-auth password",
    "GPUTOP_PROMETHEUS_CA_FILE": "a CA bundle (PEM) to verify the server's TLS certificate against",
}


def url_of(spec: str) -> str:
    """The base URL of ``--source prometheus=URL`` (``http(s)://host:port[/prefix]``, no trailing slash);
    raises ValueError with one line on bad spelling, or on a password written in the URL."""
    url, parts = source_url(spec, KIND, "http://127.0.0.1:9090")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"--source {KIND}=URL: no credentials in the URL (the command line is visible to every "
                         "user); set GPUTOP_PROMETHEUS_USER and GPUTOP_PROMETHEUS_PASSWORD(_FILE), or "
                         "GPUTOP_PROMETHEUS_TOKEN(_FILE)")
    if parts.query or parts.fragment:
        raise ValueError(f"--source {KIND}=URL: give the server's base URL, without ?query or #fragment (got {url!r})")
    return url.rstrip("/")


def _secret(env: dict, name: str) -> str | None:
    """``NAME`` from the environment, else the contents of the file ``NAME_FILE`` names (stripped)."""
    if env.get(name):
        return env[name]
    path = env.get(name + "_FILE")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError as exc:
        raise BadSource(f"{name}_FILE={path}: cannot read it ({exc.strerror or exc})") from None


def auth_header(env: dict | None = None) -> str | None:
    """The ``Authorization`` header the environment asks for: a bearer token, or basic auth; None for neither.
    Raises BadSource for both at once, a user without a password, or a file that cannot be read."""
    env = os.environ if env is None else env
    token = _secret(env, "GPUTOP_PROMETHEUS_TOKEN")
    user = env.get("GPUTOP_PROMETHEUS_USER")
    password = _secret(env, "GPUTOP_PROMETHEUS_PASSWORD")
    if token and (user or password):
        raise BadSource("give a bearer token (GPUTOP_PROMETHEUS_TOKEN) or basic auth (GPUTOP_PROMETHEUS_USER), not both")
    if token:
        return f"Bearer {token}"
    if user or password:
        if not (user and password is not None):
            raise BadSource("basic auth needs both GPUTOP_PROMETHEUS_USER and GPUTOP_PROMETHEUS_PASSWORD(_FILE)")
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    return None


def tls_context(env: dict | None = None) -> ssl.SSLContext:
    """A verifying TLS context: the system's CAs, or ``GPUTOP_PROMETHEUS_CA_FILE``'s."""
    env = os.environ if env is None else env
    cafile = env.get("GPUTOP_PROMETHEUS_CA_FILE") or None
    try:
        return ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        raise BadSource(f"GPUTOP_PROMETHEUS_CA_FILE={cafile}: not a readable CA bundle ({exc})") from None


def _said(answer: dict) -> str:
    """Prometheus' own words for a failed query (``errorType: error``), printable and cut."""
    return printable(f"{answer.get('errorType')}: {answer.get('error')}")


def _clean(data):
    """The answer's data with every string printable (label values end up on a terminal): nothing a server sends
    is shown raw."""
    if isinstance(data, str):
        return data if data.isprintable() else printable(data, 0)
    if isinstance(data, list):
        return [_clean(v) for v in data]
    if isinstance(data, dict):
        return {_clean(k): _clean(v) for k, v in data.items()}
    return data


class PrometheusClient:
    """Prometheus' HTTP API at ``url``; every call returns the answer's ``data`` or raises SourceError."""

    def __init__(self, url: str, env: dict | None = None, timeout: float = TIMEOUT_S):
        self.url, self.timeout = url.rstrip("/"), timeout
        self._auth = auth_header(env)
        self._tls = tls_context(env) if self.url.startswith("https:") else None

    def _get(self, endpoint: str, params: list[tuple[str, str]], method: str = "POST") -> object:
        where = f"{self.url}{endpoint}"
        form = urllib.parse.urlencode(params)
        headers = {"Accept": "application/json"}
        if self._auth:
            headers["Authorization"] = self._auth
        if method == "GET":  # the label values endpoint answers GET only
            url, data = f"{where}?{form}", None
        else:
            url, data = where, form.encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        # the whole request within the deadline (urls.request): a server that trickles cannot hold gputop
        answer = request(url, "Prometheus", deadline_s=self.timeout, data=data, headers=headers, method=method,
                         context=self._tls, name=self.url)
        try:
            parsed = json.loads(answer.body)
        except ValueError:
            parsed = None
        if answer.status >= 300:  # Prometheus answers a failed query with 400/422/503 and its JSON
            if isinstance(parsed, dict) and parsed.get("status") == "error":
                raise QueryFailed(f"{where}: Prometheus refused the query ({_said(parsed)})")
            hint = " (set GPUTOP_PROMETHEUS_TOKEN or _USER/_PASSWORD)" if answer.status in (401, 403) else ""
            raise SourceUnreachable(f"{where}: HTTP {answer.status} {answer.reason}{hint}")
        answer = parsed
        if not isinstance(answer, dict) or answer.get("status") not in ("success", "error") or (
                answer.get("status") == "success" and "data" not in answer):
            raise BadSource(f"{where}: the answer is not Prometheus' HTTP API (is {self.url} a Prometheus server?)")
        if answer["status"] == "error":
            raise QueryFailed(f"{where}: the query failed ({_said(answer)})")
        return _clean(answer["data"])

    def _vector(self, data, endpoint: str, kind: str) -> list[dict]:
        if not isinstance(data, dict) or data.get("resultType") != kind or not isinstance(data.get("result"), list):
            raise BadSource(f"{self.url}{endpoint}: the answer is not Prometheus' HTTP API (no {kind} result)")
        return data["result"]

    def query(self, promql: str, at: float | None = None) -> list[dict]:
        """An instant vector: ``[{"metric": {labels}, "value": [t, "v"]}, ...]``."""
        params = [("query", promql)] + ([("time", f"{at:.3f}")] if at is not None else [])
        return self._vector(self._get("/api/v1/query", params), "/api/v1/query", "vector")

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict]:
        """A matrix: ``[{"metric": {labels}, "values": [[t, "v"], ...]}, ...]``."""
        params = [("query", promql), ("start", f"{start:.3f}"), ("end", f"{end:.3f}"), ("step", f"{step:g}")]
        return self._vector(self._get("/api/v1/query_range", params), "/api/v1/query_range", "matrix")

    def series(self, *match: str, start: float | None = None, end: float | None = None) -> list[dict]:
        """The label sets of the series that match any of ``match`` (within [start, end] where given)."""
        params = [("match[]", m) for m in match]
        params += [(k, f"{v:.3f}") for k, v in (("start", start), ("end", end)) if v is not None]
        data = self._get("/api/v1/series", params)
        if not isinstance(data, list):
            raise BadSource(f"{self.url}/api/v1/series: the answer is not Prometheus' HTTP API (no list of series)")
        return data

    def label_values(self, label: str, *match: str, start: float | None = None, end: float | None = None) -> list[str]:
        """The values ``label`` takes on the series that match any of ``match`` (in blocks within [start, end]
        where given): read from the index, no sample is decoded."""
        endpoint = f"/api/v1/label/{urllib.parse.quote(label, safe='')}/values"
        params = [("match[]", m) for m in match]
        params += [(k, f"{v:.3f}") for k, v in (("start", start), ("end", end)) if v is not None]
        data = self._get(endpoint, params, method="GET")
        if not isinstance(data, list) or not all(isinstance(v, str) for v in data):
            raise BadSource(f"{self.url}{endpoint}: the answer is not Prometheus' HTTP API (no list of values)")
        return data
