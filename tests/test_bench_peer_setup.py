"""The peer benchmark's wait for agentkb's index merges: the gauge it reads from `/metrics`."""

from __future__ import annotations

from bench.peer_setup import MERGES_PENDING, gauge_value


def test_settle_reads_the_pending_merges_gauge_as_prometheus_writes_it() -> None:
    """`bench.peer_setup` reads agentkb's pending-merges gauge with prometheus-client's parser: the unlabelled
    sample, a timestamp after it or not; a labelled one, or a page that is no exposition, is no such gauge."""
    gauge = f"# HELP {MERGES_PENDING} Merges.\n# TYPE {MERGES_PENDING} gauge\n"
    assert gauge_value(gauge + f"{MERGES_PENDING} 3.0\n", MERGES_PENDING) == 3.0
    assert gauge_value(gauge + f"{MERGES_PENDING} 0 1700000000000\n", MERGES_PENDING) == 0.0
    assert gauge_value(gauge + f'{MERGES_PENDING}{{pid="7"}} 2.0\n', MERGES_PENDING) is None
    assert gauge_value("<html><body>MindsDB</body></html>", MERGES_PENDING) is None
