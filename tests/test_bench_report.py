"""bench/results/ and docs/benchmarks.md: result files named by what they hold, the page generated from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import common, report


def _write(folder: Path, name: str, when: str, quick: bool = False, mode: str = "") -> None:
    document = {
        "benchmark": "peer",
        "when": when,
        "machine": {"cpu": "AMD EPYC"},
        "quick": quick,
        "table": [],
        **({"mode": mode} if mode else {}),
    }
    (folder / name).write_text(json.dumps(document))


def test_result_files_are_named_by_their_benchmark_time_and_cpu() -> None:
    files = sorted(common.RESULTS.glob("*"))
    assert files
    for path in files:
        assert common.RESULT_NAME.match(path.name), path.name
        assert path.name == common.result_name(json.loads(path.read_text())), path.name


def test_result_name_reads_time_and_cpu_from_the_document() -> None:
    document = {
        "benchmark": "writes",
        "when": "2026-11-28T02:54:43.689386+00:00",
        "machine": {"cpu": "Intel(R) Xeon(R) Processor", "cpu_family_model": "6/143"},
    }
    assert common.result_name(document) == "writes-20261128T0254-intel-xeon-6-143.json"
    assert common.RESULT_NAME.match(common.result_name(document))


def test_the_newest_result_is_picked_by_the_time_inside_not_the_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    _write(
        tmp_path, "peer-20991231T2359-zzz.json", "2026-11-01T00:00:00+00:00"
    )  # the last name, the oldest run
    _write(tmp_path, "peer-20000101T0000-aaa.json", "2026-11-20T00:00:00+00:00")
    _write(
        tmp_path, "peer-20000101T0001-aaa.json", "2026-11-21T00:00:00+00:00", quick=True
    )  # newer, but quick
    picked = report.newest("peer")
    assert picked is not None and picked[0].name == "peer-20000101T0000-aaa.json"


def test_a_run_in_another_mode_has_a_section_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    _write(tmp_path, "peer-20000101T0000-aaa.json", "2026-11-20T00:00:00+00:00")
    _write(tmp_path, "peer-20000101T0100-aaa.json", "2026-11-21T00:00:00+00:00", mode="32 concurrent clients")
    plain, clients = report.newest("peer"), report.newest("peer", "32 concurrent clients")
    assert plain is not None and plain[0].name == "peer-20000101T0000-aaa.json"
    assert clients is not None and clients[0].name == "peer-20000101T0100-aaa.json"
    page = report.render()
    assert "\n## peer\n" in page and "\n## peer, 32 concurrent clients\n" in page
    assert "[peer, 32 concurrent clients](#peer-32-concurrent-clients)" in page


def test_benchmarks_page_is_what_bench_report_writes() -> None:
    assert report.DOC.read_text() == report.render(), (
        "docs/benchmarks.md is stale: run `python -m bench report`"
    )
