"""Self-contained HTML pages: one file, inline CSS, no scripts, nothing fetched."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#0f172a;
max-width:1200px}
h1{font-size:22px;margin-bottom:4px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid
#e2e8f0;padding-bottom:4px}h3{font-size:14px;margin:16px 0 4px}
.meta{color:#475569;font-size:13px}
table{border-collapse:collapse;font-size:12px;width:100%;margin:6px 0}
th,td{border:1px solid #e2e8f0;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f1f5f9}tr:nth-child(even) td{background:#fafafa}
.sev{display:inline-block;padding:1px 6px;border-radius:8px;color:#fff;font-size:11px}
.sev-critical{background:#7f1d1d}.sev-high{background:#dc2626}.sev-medium{background:#b45309}
.sev-low{background:#2563eb}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #e2e8f0;border-radius:6px;
padding:8px 14px;min-width:110px}.card b{display:block;font-size:22px}
.legend span{margin-right:14px;font-size:12px}.sw{display:inline-block;width:10px;height:10px;
margin-right:4px}
code,.mono{font-family:ui-monospace,monospace;font-size:11px}
.ok{color:#166534;font-weight:600}.bad{color:#b91c1c;font-weight:600}
details summary{cursor:pointer}
"""


def page(title: str, body: Iterable[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        + "".join(body)
        + "</body></html>\n"
    )


def table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], raw: Sequence[int] = (), cls: str = ""
) -> str:
    """A table; cells are escaped except the columns listed in ``raw`` (already HTML)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(
            f"<td>{cell if i in raw else escape(str(cell))}</td>" for i, cell in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    klass = f' class="{cls}"' if cls else ""
    return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def severity_badge(severity: str) -> str:
    return f'<span class="sev sev-{escape(severity)}">{escape(severity)}</span>'
