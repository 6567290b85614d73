"""The benchmarks' pure report helpers: medians and spreads, targets, and the checks that make
a benchmark exit non-zero (benchmarks/report.py, benchmarks/standalone.py)."""

from __future__ import annotations

from typing import Any

import pytest
from benchmarks.report import print_targets, summarize, verdict
from benchmarks.standalone import checks


def test_summarize_gives_median_min_max_of_present_figures() -> None:
    reps: list[dict[str, Any]] = [{"a": {"b": 3}}, {"a": {"b": 1}}, {"a": {"b": 2}, "c": 5}]
    found = summarize(reps, [("a.b", "", ""), ("c", "", ""), ("missing", "", "")])
    assert found["a.b"] == {"median": 2, "min": 1, "max": 3, "n": 3}
    assert found["c"] == {"median": 5, "min": 5, "max": 5, "n": 1}
    assert "missing" not in found


def test_verdict_is_loud_and_non_zero_on_a_failed_check(capsys: pytest.CaptureFixture[str]) -> None:
    passed = [{"repetition": 1, "failed_checks": []}]
    assert verdict(passed, "all good") == 0
    assert capsys.readouterr().out == "all good\n"
    failed = [*passed, {"repetition": 2, "failed_checks": ["all 10 Runs succeeded: 9 did"]}]
    assert verdict(failed, "all good") == 1
    out = capsys.readouterr().out
    assert "CHECKS FAILED (1)" in out and "repetition 2: all 10 Runs succeeded: 9 did" in out
    assert "all good" not in out


def test_targets_met_or_missed_by_the_median(capsys: pytest.CaptureFixture[str]) -> None:
    summary = {"s": {"median": 2.5, "min": 1.0, "max": 9.0, "n": 3}}
    print_targets(summary, 10_000, [("fast", "s", 3.0), ("faster", "s", 2.0),
                                    ("absent", "x", 1.0)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["target for 10,000: fast: met (median 2.5)",
                         "target for 10,000: faster: MISSED (median 2.5)",
                         "target for 10,000: absent: MISSED (median -)"]


def test_standalone_checks() -> None:
    assert checks(10, runs=10, triggers=10, misfired=0, succeeded=10) == []
    assert checks(10, runs=7, triggers=7, misfired=3, succeeded=7) == []  # a target, not a check
    assert checks(10, runs=11, triggers=10, misfired=0, succeeded=11) == [
        "each occurrence admitted at most once: 11 Runs from 10 triggers"]
    assert checks(10, runs=9, triggers=9, misfired=0, succeeded=9) == [
        "all 10 occurrences decided: 9 admitted, 0 misfired"]
    assert checks(10, runs=10, triggers=10, misfired=0, succeeded=8) == [
        "every admitted Run succeeded: 8 of 10 did"]
