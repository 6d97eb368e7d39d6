"""New findings to a webhook (JSON) and to Alertmanager (its API v2 format).

The webhook gets one POST per batch of new findings: ``{"source": "kgw-analyze",
"findings": [<finding as in findings.json>, ...]}``. Alertmanager gets one POST to
``<url>/api/v2/alerts`` with one alert per finding: labels ``alertname`` (``kgw_`` and
the detector), ``detector``, ``severity``, ``entity``, ``finding_id`` and, when known,
``principal``, ``client_host``, ``tenant``; annotations ``summary``, ``title`` and
``evidence`` (JSON); ``startsAt`` the finding's start and ``endsAt`` its end plus
``resolve_after_s``. A receiver that fails is retried, then logged; findings are
never lost for it (they are in ``findings.jsonl`` first).
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .findings import Finding, severity_at_least
from .records import rfc3339_ms
from .settings import AlertsConfig

log = logging.getLogger(__name__)
SOURCE = "kgw-analyze"


def webhook_payload(findings: Sequence[Finding]) -> dict[str, Any]:
    return {"source": SOURCE, "findings": [f.to_json() for f in findings]}


def alertmanager_payload(
    findings: Sequence[Finding], resolve_after_s: float
) -> list[dict[str, Any]]:
    alerts = []
    for f in findings:
        labels = {
            "alertname": f"kgw_{f.detector}",
            "detector": f.detector,
            "severity": f.severity,
            "entity": f.entity,
            "finding_id": f.id,
        }
        for name in ("principal", "client_host", "tenant"):
            value = getattr(f, name)
            if value:
                labels[name] = str(value)
        alerts.append(
            {
                "labels": labels,
                "annotations": {
                    "summary": f.summary,
                    "title": f.title,
                    "evidence": json.dumps(f.evidence, sort_keys=True, default=str),
                },
                "startsAt": rfc3339_ms(int(f.start * 1000)),
                "endsAt": rfc3339_ms(int((f.end + resolve_after_s) * 1000)),
                "generatorURL": f"kgw-analyze://findings/{f.id}",
            }
        )
    return alerts


@dataclass(slots=True)
class Delivery:
    receiver: str
    ok: bool
    status: int | None
    attempts: int
    error: str | None = None


def post_json(url: str, body: Any, timeout_s: float, retries: int, receiver: str) -> Delivery:
    data = json.dumps(body, default=str).encode()
    error: str | None = None
    status: int | None = None
    for attempt in range(1, retries + 2):
        request = urllib.request.Request(
            url, data=data, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                status = response.status
            return Delivery(receiver, True, status, attempt)
        except urllib.error.HTTPError as exc:
            status, error = exc.code, f"HTTP {exc.code}"
            if exc.code < 500:
                break  # the receiver refuses this body: retrying will not help
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            error = type(exc).__name__ + (f": {exc.reason}" if hasattr(exc, "reason") else "")
        time.sleep(min(0.5 * attempt, 2.0))
    log.error(
        "analytics.alert_failed",
        extra={"receiver": receiver, "status": status, "error": error},
    )
    return Delivery(receiver, False, status, attempt, error)


def send(findings: Sequence[Finding], config: AlertsConfig) -> list[Delivery]:
    """Deliver ``findings`` at or above the configured severity to each receiver."""
    chosen = [f for f in findings if severity_at_least(f.severity, config.min_severity)]
    if not chosen:
        return []
    done = []
    if config.webhook_url is not None:
        done.append(
            post_json(
                str(config.webhook_url), webhook_payload(chosen), config.timeout_s,
                config.retries, "webhook",
            )
        )  # fmt: skip
    if config.alertmanager_url is not None:
        url = str(config.alertmanager_url).rstrip("/") + "/api/v2/alerts"
        body = alertmanager_payload(chosen, config.resolve_after_s)
        done.append(post_json(url, body, config.timeout_s, config.retries, "alertmanager"))
    return done
