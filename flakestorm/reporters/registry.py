"""The report formats — each one a file name and a pure renderer — and writing them.

:data:`REPORTS` is the one registry: a run writes the configured formats with
:func:`write_reports`, and ``flakestorm report`` renders any of them from a ``results.json``.
The renderer modules are imported when first used (jinja2 is not loaded for a run that writes
no HTML).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI imports this module at start: no pydantic here
    from flakestorm.config import OutputFormat
    from flakestorm.results.model import RunResult


@dataclass(frozen=True)
class Report:
    file_name: str
    module: str
    """The renderer module in :mod:`flakestorm.reporters`…"""
    function: str = "render"
    """…and its function ``(result) -> str``."""

    def render(self, result: RunResult) -> str:
        module = importlib.import_module(f"flakestorm.reporters.{self.module}")
        text: str = getattr(module, self.function)(result)
        return text

    def write(self, result: RunResult, path: Path) -> None:
        """Render into ``path``: streamed when the renderer module can (a ``write(result,
        file)`` beside ``render``, as ``results.json`` does), else in one piece."""
        module = importlib.import_module(f"flakestorm.reporters.{self.module}")
        stream = getattr(module, "write", None) if self.function == "render" else None
        if stream is None:
            path.write_text(self.render(result), encoding="utf-8")
            return
        with path.open("w", encoding="utf-8") as out:
            stream(result, out)


REPORTS: dict[str, Report] = {
    "junit": Report("junit.xml", "junit"),
    "markdown": Report("summary.md", "markdown"),
    "html": Report("report.html", "html"),
    "json": Report("results.json", "json"),
    "comment": Report("comment.md", "comment", "render_first"),
}
"""Every format by name; all but ``comment`` are ``output.formats`` values."""


def write_report(result: RunResult, out_dir: Path, name: str) -> Path:
    """Render format ``name`` of ``result`` into its file in ``out_dir`` (which must exist)."""
    report = REPORTS[name]
    path = out_dir / report.file_name
    report.write(result, path)
    return path


def write_reports(
    result: RunResult, out_dir: Path, formats: Iterable[OutputFormat] | None = None
) -> dict[OutputFormat, Path]:
    """Render ``result`` in each format (default: all) into ``out_dir``; results.json is
    always written."""
    from flakestorm.config import OutputFormat

    wanted = dict.fromkeys([OutputFormat.JSON, *(OutputFormat if formats is None else formats)])
    out_dir.mkdir(parents=True, exist_ok=True)
    return {fmt: write_report(result, out_dir, fmt.value) for fmt in wanted}
