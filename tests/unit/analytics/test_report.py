"""The HTML report and its charts: well-formed, self-contained, escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from gateway.analytics import kinds
from gateway.analytics.findings import Finding
from gateway.analytics.job import AnalysisResult
from gateway.analytics.report import render_report
from gateway.analytics.svg import Bar, Span, bar_chart, timeline

T0 = 1_793_318_400


def _result() -> AnalysisResult:
    evil = "User:<script>alert(1)</script>"
    findings = [
        Finding(
            kinds.PROBING,
            "critical",
            3.0,
            evil,
            T0 + 7200,
            T0 + 10800,
            f"{evil} was denied 24 different topics",
            {"sample_topics": ["<b>x</b>"]},
            principal=evil,
        ),
        Finding(
            kinds.NEW_ADDRESS,
            "high",
            1.5,
            "User:bob",
            T0 + 3600,
            T0 + 4000,
            "User:bob connected from 10.9.9.9",
            {"address": "10.9.9.9"},
            principal="User:bob",
        ),
    ]
    points = [
        {"hour": T0 + h * 3600, "allowed": 10 + h, "denied": h % 2, "failed": 0} for h in range(6)
    ]
    return AnalysisResult(
        findings,
        1234,
        0,
        T0,
        T0 + 6 * 3600,
        T0 + 3 * 3600,
        12.5,
        {},
        {evil: points, "User:bob": points[:3]},
    )


def test_report_is_self_contained_and_escaped() -> None:
    result = _result()
    meta = {**result.meta(), "generated": "2026-11-22T00:00:00.000Z"}
    html = render_report(result, meta)
    assert html.startswith("<!DOCTYPE html>")
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<b>x</b>" not in html
    for finding in result.findings:
        assert finding.id in html
    assert html.count('class="timeline"') == 2
    assert "1,234 records" in html


def test_charts_are_valid_svg() -> None:
    chart = bar_chart([Bar("a & b", 3), Bar("c", 0.5, note="<n>")])
    root = ET.fromstring(chart)
    assert root.tag.endswith("svg") and len(root.findall("{*}rect")) == 2
    line = timeline(
        [{"hour": T0 + 3600, "allowed": 5, "denied": 2, "failed": 1}],
        [Span(T0, T0 + 60, "#f00", "x < y")],
        T0 + 1800,
        T0,
        T0 + 7200,
    )
    root = ET.fromstring(line)
    assert root.findall("{*}polyline")
    assert bar_chart([]).startswith("<p")
