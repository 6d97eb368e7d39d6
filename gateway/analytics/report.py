"""The analysis report: one HTML file a security admin opens in a browser.

Sections: the run (period, records, detection window), findings per severity and
per detector, the top findings as a chart, a timeline per principal with the
findings marked on it, and every finding with its evidence.
"""

from __future__ import annotations

import json
from collections import Counter
from html import escape
from typing import TYPE_CHECKING, Any

from .findings import Finding
from .kinds import DETECTORS, SEVERITIES
from .page import page, severity_badge, table
from .records import rfc3339_ms
from .svg import SEVERITY_COLOURS, Bar, Span, bar_chart, timeline

if TYPE_CHECKING:
    from .job import AnalysisResult

TOP = 20


def _when(start: float, end: float) -> str:
    first = rfc3339_ms(int(start * 1000))[:16].replace("T", " ")
    last = rfc3339_ms(int(end * 1000))[:16].replace("T", " ")
    if last == first:
        return first
    return f"{first} to {last[11:] if last[:10] == first[:10] else last}"


def _evidence(evidence: dict[str, Any]) -> str:
    items = "".join(
        f"<li><b>{escape(key)}</b>: {escape(_value(value))}</li>" for key, value in evidence.items()
    )
    return f'<ul class="mono">{items}</ul>'


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, list | dict):
        return json.dumps(value)
    return str(value)


def _overview(result: AnalysisResult, meta: dict[str, Any]) -> list[str]:
    severities = Counter(f.severity for f in result.findings)
    cards = "".join(
        f'<div class="card">{severity_badge(s)}<b>{severities.get(s, 0)}</b></div>'
        for s in reversed(SEVERITIES)
    )
    per_detector = Counter(f.detector for f in result.findings)
    detector_bars = [
        Bar(title, per_detector.get(name, 0), "#0f766e", name) for name, title in DETECTORS.items()
    ]
    return [
        "<h1>KaaS Gateway — access-log analysis</h1>",
        f'<p class="meta">{result.records:,} records from {escape(meta["data_start"])} to '
        f"{escape(meta['data_end'])}. Findings of the baseline detectors come from "
        f"{escape(meta['detect_from'])} on (the time before is each principal's baseline). "
        f"Analysed in {result.seconds:.1f} s; generated {escape(meta['generated'])}.</p>",
        f'<p class="meta" id="finding-count"><b>{len(result.findings)}</b> findings.</p>',
        f'<div class="cards">{cards}</div>',
        "<h2>Findings per detector</h2>",
        bar_chart(detector_bars, label_width=420),
    ]


def _top(findings: list[Finding]) -> list[str]:
    bars = [
        Bar(
            f"{f.entity} · {f.detector}", round(f.score, 2), SEVERITY_COLOURS[f.severity], f.summary
        )
        for f in findings[:TOP]
    ]
    legend = "".join(
        f'<span><i class="sw" style="background:{c}"></i>{s}</span>'
        for s, c in SEVERITY_COLOURS.items()
    )
    return [
        f'<h2>Top findings</h2><p class="meta">The {min(TOP, len(findings))} most severe, '
        "by how far each is past its detector's threshold (1 = at the threshold).</p>",
        f'<div class="legend">{legend}</div>',
        bar_chart(bars, label_width=420),
    ]


def _timelines(result: AnalysisResult) -> list[str]:
    if not result.timelines:
        return []
    parts = [
        "<h2>Timelines</h2>",
        '<p class="meta legend"><span><i class="sw" style="background:#0f766e"></i>allowed '
        'requests per hour</span><span><i class="sw" style="background:#dc2626"></i>denied'
        '</span><span><i class="sw" style="background:#7c3aed"></i>failed logins</span>'
        '<span><i class="sw" style="background:#eef2ff"></i>detection window</span>'
        "<span>bands: findings</span></p>",
    ]
    for principal, points in result.timelines.items():
        mine = [f for f in result.findings if f.principal == principal]
        spans = [
            Span(f.start, f.end, SEVERITY_COLOURS[f.severity], f"{f.detector}: {f.summary}")
            for f in mine
        ]
        names = ", ".join(sorted({f.detector for f in mine}))
        parts.append(
            f'<h3 class="principal">{escape(principal)} <span class="meta">'
            f"({escape(names)})</span></h3>"
        )
        parts.append(
            timeline(points, spans, result.detect_from, result.data_start, result.data_end + 1)
        )
    return parts


def _all(findings: list[Finding]) -> list[str]:
    rows = [
        (
            severity_badge(f.severity),
            escape(f.detector),
            escape(f.entity),
            escape(_when(f.start, f.end)),
            f"{escape(f.summary)}<details><summary>evidence</summary>{_evidence(f.evidence)}"
            f"</details>",
            f'<span class="mono">{f.id}</span>',
        )
        for f in findings
    ]
    return [
        "<h2>All findings</h2>",
        table(
            ("severity", "detector", "who", "when (UTC)", "what", "id"),
            rows,
            raw=range(6),
            cls="findings",
        )
        if rows
        else '<p class="empty">No findings.</p>',
    ]


def render_report(result: AnalysisResult, meta: dict[str, Any]) -> str:
    body = [
        *_overview(result, meta),
        *_top(result.findings),
        *_timelines(result),
        *_all(result.findings),
    ]
    return page("kgw analyze — findings", body)
