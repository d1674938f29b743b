"""``gputop --export`` answers as dcgm-exporter does (issue 24 item 6): the metrics at /metrics, a page at / that
links to them, 404 on any other path. A real exporter process on the demo trace."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from export_util import free_port, get, start_exporter, stop, wait_for_metrics


@pytest.fixture(scope="module")
def exporter():
    port = free_port()
    proc = start_exporter(f"127.0.0.1:{port}", "--demo")
    try:
        wait_for_metrics(proc, port)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


def status_of(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_metrics_are_at_metrics(exporter):
    code, text = status_of(exporter + "/metrics")
    assert code == 200 and "DCGM_FI_DEV_SM_CLOCK{" in text


def test_the_root_page_links_to_the_metrics(exporter):
    code, text = status_of(exporter + "/")
    assert code == 200 and 'href="./metrics"' in text and "DCGM_FI" not in text


@pytest.mark.parametrize("path", ["/nope", "/metrics/", "/metricsx", "/favicon.ico", "/metrics/../x"])
def test_any_other_path_is_404(exporter, path):
    code, text = status_of(exporter + path)
    assert code == 404 and "DCGM_FI" not in text and "/metrics" in text


def test_a_query_string_does_not_change_the_path(exporter):
    assert "DCGM_FI_DEV_SM_CLOCK{" in get(exporter + "/metrics?x=1")
