"""``kgw simulate`` then ``kgw analyze`` end to end, on Spark in local mode.

The simulator's default scenario (6 tenants, 48 principals, 72 hours, 3 attacks of
each kind) is analysed from JSON lines and, after ``kgw analyze convert``, from
Parquet. Every detector must hold recall >= 0.95 and precision >= 0.9 against the
labels, and the HTML report is rendered in headless Chromium. Nothing skips: no
Spark, Java or Chromium fails these tests.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.analytics import kinds
from gateway.analytics.findings import read_findings_json
from gateway.cli import main

pytestmark = pytest.mark.jvm  # kgw analyze starts Spark inside main(): no fixture shows it

MIN_PRECISION = 0.9
MIN_RECALL = 0.95
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


@dataclass(frozen=True)
class Run:
    out: Path
    stdout: str
    stderr: str
    code: int
    seconds: float


def kgw(*argv: str) -> Run:
    """``kgw`` in this process (the Spark session is shared between runs)."""
    out, err = io.StringIO(), io.StringIO()
    began = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return Run(Path(), out.getvalue(), err.getvalue(), code, time.monotonic() - began)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sim")
    run = kgw("simulate", "--out", str(root))
    assert run.code == 0, run.stderr
    assert "labels" in run.stdout
    return root


@pytest.fixture(scope="module")
def analysis(simulated: Path) -> Run:
    out = simulated / "analysis"
    run = kgw(
        "analyze",
        "--logs",
        str(simulated / "logs"),
        "--out",
        str(out),
        "--evaluate",
        str(simulated / "labels.json"),
    )
    assert run.code == 0, run.stderr
    print(run.stdout)
    print(f"kgw analyze (JSON) took {run.seconds:.1f}s")
    return Run(out, run.stdout, run.stderr, run.code, run.seconds)


def test_every_detector_holds_precision_and_recall(analysis: Run) -> None:
    evaluation = json.loads((analysis.out / "evaluation.json").read_text())
    scores = {s["detector"]: s for s in evaluation["scores"]}
    assert set(scores) == set(kinds.DETECTORS)
    failing = {
        name: (s["precision"], s["recall"])
        for name, s in scores.items()
        if s["precision"] < MIN_PRECISION or s["recall"] < MIN_RECALL or s["labels"] == 0
    }
    assert not failing, (failing, evaluation["false_positives"], evaluation["missed"])
    assert "precision" in analysis.stdout and "topic_probing" in analysis.stdout


def test_progress_is_logged_per_stage(analysis: Run) -> None:
    stages = [line for line in analysis.stderr.splitlines() if "] stage " in line]
    assert len(stages) == 7, analysis.stderr
    assert stages[0].startswith("[analyze") and "stage 1/7: reading" in stages[0]
    assert "done in" in analysis.stderr


def test_findings_are_written_as_json_and_parquet(analysis: Run, spark: Any) -> None:
    findings = read_findings_json(analysis.out / "findings.json")
    document = json.loads((analysis.out / "findings.json").read_text())
    assert document["records"] > 50_000 and document["counts"][kinds.SPRAYING] == 3
    parquet = spark.read.parquet(str(analysis.out / "findings.parquet"))
    rows = {(r.detector, r.entity, r.severity) for r in parquet.collect()}
    assert rows == {(f.detector, f.entity, f.severity) for f in findings}
    assert dict(parquet.dtypes)["start"] == "timestamp"
    for finding in findings:
        assert finding.summary and finding.evidence, finding
    summary = json.loads((analysis.out / "summary.json").read_text())
    assert summary["records_per_second"] > 0 and summary["stage_seconds"]


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium is not installed (scripts/setup.sh installs Debian's chromium)")
    return found


def _render(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)


def test_report_shows_the_findings_in_chromium(analysis: Run, tmp_path: Path) -> None:
    report = analysis.out / "report.html"
    findings = read_findings_json(analysis.out / "findings.json")
    dom = _render(report, tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert f"<b>{len(findings)}</b> findings" in html
    assert html.count('<svg class="timeline"') >= 5
    for finding in findings:
        assert finding.id in html, finding
    shot = tmp_path / "report.png"
    result = _render(
        report, tmp_path / "profile2", f"--screenshot={shot}", "--window-size=1280,2000"
    )
    assert result.returncode == 0 and shot.stat().st_size > 20_000


def test_parquet_input_gives_the_same_findings(simulated: Path, analysis: Run) -> None:
    parquet = simulated / "parquet"
    convert = kgw("analyze", "convert", "--in", str(simulated / "logs"), "--out", str(parquet))
    assert convert.code == 0, convert.stderr
    assert any(p.name.startswith("day=") for p in parquet.iterdir())
    out = simulated / "analysis-parquet"
    run = kgw("analyze", "--logs", str(parquet), "--out", str(out), "--no-report")
    assert run.code == 0, run.stderr
    print(f"kgw analyze (Parquet) took {run.seconds:.1f}s")

    def key(path: Path) -> set[tuple[str, str, float]]:
        return {(f.detector, f.entity, f.start) for f in read_findings_json(path)}

    assert key(out / "findings.json") == key(analysis.out / "findings.json")
    assert not (out / "report.html").exists()


def test_command_line_in_its_own_process(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "KGW_CACHE_DIR": str(cache)}
    env.pop("KGW_SPARK_CDS", None)
    bad = subprocess.run(
        [sys.executable, "-m", "gateway", "analyze", "--logs", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert bad.returncode == 2 and "no such file or directory" in bad.stderr
    lonely = tmp_path / "one.jsonl"
    lonely.write_text(
        '{"v":1,"ts":"2026-11-22T14:00:02.001Z","type":"connection","event":"auth",'
        '"client_host":"198.51.100.9","principal":"User:b","outcome":"failure"}\n'
    )
    argv = [sys.executable, "-m", "gateway", "analyze", "--logs", str(lonely)]
    archives: list[Path] = []
    for run in range(2):  # the first run writes the class-data archive, the second maps it
        out = tmp_path / f"out{run}"
        ok = subprocess.run(
            [*argv, "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            check=False,
        )
        assert ok.returncode == 0, ok.stderr[-3000:]
        assert "stage 7/7" in ok.stderr and "0 findings in 1 records" in ok.stdout
        assert "[cds]" not in ok.stdout + ok.stderr  # the JVM's archive chatter stays quiet
        files = sorted((cache / "spark-cds").iterdir())
        assert [f.suffix for f in files] == [".jsa"], files
        assert files[0].stat().st_size > 10_000_000
        archives.append(files[0])
    assert archives[0] == archives[1]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from gateway.analytics.spark import session

    yield session()
