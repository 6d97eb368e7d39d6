"""Small inline SVG charts for the HTML reports (no plotting library, no scripts)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

SEVERITY_COLOURS = {
    "critical": "#7f1d1d",
    "high": "#dc2626",
    "medium": "#f59e0b",
    "low": "#3b82f6",
}
FONT = 'font-family="system-ui,sans-serif" font-size="11"'


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    value: float
    colour: str = "#2563eb"
    note: str = ""


def bar_chart(bars: Sequence[Bar], width: int = 760, row: int = 20, label_width: int = 280) -> str:
    """Horizontal bars, one row each, the value written at the end of the bar."""
    if not bars:
        return '<p class="empty">nothing to plot</p>'
    top = max(b.value for b in bars) or 1.0
    span = width - label_width - 70
    height = row * len(bars) + 8
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg" {FONT}>'
    ]
    for i, bar in enumerate(bars):
        y = 4 + i * row
        length = max(1.0, span * bar.value / top)
        fits = label_width // 6
        label = bar.label if len(bar.label) <= fits else bar.label[: fits - 1] + "…"
        parts.append(
            f'<text x="{label_width - 6}" y="{y + row * 0.65:.1f}" text-anchor="end">'
            f"{escape(label)}</text>"
            f'<rect x="{label_width}" y="{y + 2}" width="{length:.1f}" height="{row - 6}" '
            f'fill="{bar.colour}"><title>{escape(bar.label)}: {escape(_num(bar.value))}'
            f"{escape(' — ' + bar.note if bar.note else '')}</title></rect>"
            f'<text x="{label_width + length + 4:.1f}" y="{y + row * 0.65:.1f}">'
            f"{escape(_num(bar.value))}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _num(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.2f}"


@dataclass(frozen=True, slots=True)
class Span:
    start: float
    end: float
    colour: str
    label: str


def timeline(
    points: Sequence[dict[str, int]],
    spans: Sequence[Span],
    detect_from: float,
    start: float,
    end: float,
    width: int = 900,
    height: int = 150,
) -> str:
    """Hourly allowed requests (line), denied and failed logins (bars), findings (bands)."""
    left, right, top, bottom = 48, 10, 10, 22
    plot_w, plot_h = width - left - right, height - top - bottom
    duration = max(end - start, 3600.0)
    peak = max([p["allowed"] for p in points] + [p["denied"] + p["failed"] for p in points] + [1])

    def x(t: float) -> float:
        return left + plot_w * (t - start) / duration

    def y(v: float) -> float:
        return top + plot_h * (1 - v / peak)

    parts = [
        f'<svg class="timeline" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg" {FONT}>',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#f8fafc" '
        'stroke="#cbd5e1"/>',
    ]
    if start < detect_from < end:
        parts.append(
            f'<rect x="{x(detect_from):.1f}" y="{top}" width="{x(end) - x(detect_from):.1f}" '
            f'height="{plot_h}" fill="#eef2ff"><title>detection window</title></rect>'
        )
    for span in spans:
        x0, x1 = x(max(span.start, start)), x(min(max(span.end, span.start + 900), end))
        parts.append(
            f'<rect x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 3):.1f}" height="{plot_h}" '
            f'fill="{span.colour}" fill-opacity="0.25"><title>{escape(span.label)}</title></rect>'
        )
    bar_w = max(1.0, plot_w * 3600 / duration - 1)
    for p in points:
        if p["denied"]:
            parts.append(
                f'<rect x="{x(p["hour"]):.1f}" y="{y(p["denied"]):.1f}" width="{bar_w:.1f}" '
                f'height="{top + plot_h - y(p["denied"]):.1f}" fill="#dc2626">'
                f"<title>{p['denied']} denied</title></rect>"
            )
        if p["failed"]:
            parts.append(
                f'<rect x="{x(p["hour"]):.1f}" y="{y(p["failed"]):.1f}" width="{bar_w:.1f}" '
                f'height="{top + plot_h - y(p["failed"]):.1f}" fill="#7c3aed">'
                f"<title>{p['failed']} failed logins</title></rect>"
            )
    allowed = {p["hour"]: p["allowed"] for p in points}
    first_hour = int(start) // 3600 * 3600
    line = " ".join(
        f"{x(h + 1800):.1f},{y(allowed.get(h, 0)):.1f}" for h in range(first_hour, int(end), 3600)
    )
    if line:
        parts.append(f'<polyline points="{line}" fill="none" stroke="#0f766e" stroke-width="1.5"/>')
    parts.append(f'<text x="{left - 4}" y="{top + 9}" text-anchor="end">{peak:,}</text>')
    parts.append(f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end">0</text>')
    step = 6 * 3600 if duration <= 4 * 86400 else 24 * 3600
    tick = (int(start) // step + 1) * step
    while tick < end:
        label = time.strftime("%d %H:%M" if step < 86400 else "%m-%d", time.gmtime(tick))
        parts.append(
            f'<line x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{top + plot_h}" '
            f'y2="{top + plot_h + 4}" stroke="#64748b"/>'
            f'<text x="{x(tick):.1f}" y="{height - 6}" text-anchor="middle">{label}</text>'
        )
        tick += step
    parts.append("</svg>")
    return "".join(parts)
