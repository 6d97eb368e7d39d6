"""A throwaway Prometheus server (Debian's ``prometheus``) on loopback, for tests.

``PrometheusServer(workdir, targets, rules)`` writes a configuration that scrapes
``targets`` every second and evaluates ``rules`` every second, starts the server on a
free loopback port, and answers queries through its HTTP API. A missing binary
fails (never skips): ``scripts/setup.sh`` installs it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from gateway.devstack.nodes import free_ports


class PrometheusServer:
    def __init__(self, workdir: Path, targets: list[str], rules: dict[str, Any]) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError(
                "prometheus is missing: apt-get install prometheus (scripts/setup.sh)"
            )
        self.binary = binary
        self.workdir = workdir
        (self.port,) = free_ports("127.0.0.1", 1)
        self.url = f"http://127.0.0.1:{self.port}"
        (workdir / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
        config = {
            "global": {
                "scrape_interval": "1s",
                "evaluation_interval": "1s",
                "scrape_timeout": "1s",
            },
            "rule_files": [str(workdir / "rules.yml")],
            "scrape_configs": [{"job_name": "kgw", "static_configs": [{"targets": targets}]}],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> None:
        log = (self.workdir / "prometheus.log").open("ab")
        self.proc = subprocess.Popen(
            [
                self.binary,
                f"--config.file={self.workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"prometheus not ready in {timeout}s: {self.log_tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)

    def log_tail(self, lines: int = 20) -> str:
        path = self.workdir / "prometheus.log"
        return (
            "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
            if path.exists()
            else ""
        )

    def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` now."""
        result: list[dict[str, Any]] = self._get("/api/v1/query", {"query": expr})["result"]
        return result

    def value(self, expr: str) -> float | None:
        """The single value of ``expr`` now (None: empty)."""
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self._get("/api/v1/alerts")["alerts"]
        return alerts

    def firing(self, name: str) -> list[dict[str, Any]]:
        return [
            a for a in self.alerts() if a["labels"]["alertname"] == name and a["state"] == "firing"
        ]

    def targets_up(self) -> bool:
        active = self._get("/api/v1/targets")["activeTargets"]
        return bool(active) and all(t["health"] == "up" for t in active)
