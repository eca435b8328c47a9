"""Writing a run's reports to the report directory (the renderers themselves are pure)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from flakestorm.config import OutputFormat
from flakestorm.results import RunResult

FILE_NAMES = {
    OutputFormat.JSON: "results.json",
    OutputFormat.JUNIT: "junit.xml",
    OutputFormat.MARKDOWN: "summary.md",
    OutputFormat.HTML: "report.html",
}


def write_reports(
    result: RunResult, out_dir: Path, formats: Iterable[OutputFormat] = tuple(OutputFormat)
) -> dict[OutputFormat, Path]:
    """Render ``result`` in each format into ``out_dir``; results.json is always written."""
    from flakestorm.reporters import html, junit, markdown
    from flakestorm.reporters import json as json_report

    renderers = {
        OutputFormat.JSON: json_report.render,
        OutputFormat.JUNIT: junit.render,
        OutputFormat.MARKDOWN: markdown.render,
        OutputFormat.HTML: html.render,
    }
    wanted = dict.fromkeys([OutputFormat.JSON, *formats])
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for fmt in wanted:
        path = out_dir / FILE_NAMES[fmt]
        path.write_text(renderers[fmt](result), encoding="utf-8")
        written[fmt] = path
    return written
