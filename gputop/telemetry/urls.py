"""The URL of ``--source KIND=URL`` (a dcgm-exporter's ``/metrics``, a Prometheus server), checked once for both."""

from __future__ import annotations

import urllib.parse


def source_url(spec: str, kind: str, example: str) -> tuple[str, urllib.parse.SplitResult]:
    """``--source KIND=URL`` -> the URL and its parts: an http(s) URL with a host and a valid port (raises
    ValueError with one line naming ``example`` otherwise)."""
    given, sep, url = spec.partition("=")
    if given != kind or not sep:
        raise ValueError(f"--source takes {kind}=URL (got {spec!r})")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--source {kind}=URL needs an http(s) URL such as {example} (got {url!r})")
    try:
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        raise ValueError(f"--source {kind}=URL: bad port in {url!r}") from None
    return url, parts
