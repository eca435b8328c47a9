"""Render every golden case in every format; ``python -m tests.golden.regenerate`` rewrites them.

Run from the repository root::

    .venv/bin/python -m tests.golden.regenerate

then review the diff of ``tests/golden/`` like any other change.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from flakestorm.reporters import comment, html, junit, markdown
from flakestorm.results.model import RunResult

from .cases import CASES

HERE = Path(__file__).parent
PREVIOUS = comment.CommentState(score=83.33, run="run-41")
"""The state the golden comments compare against."""


def _comment(result: RunResult) -> str:
    return comment.render(
        result,
        PREVIOUS,
        comment.marker_key(result.config_path),
        run_id="run-42",
        summary_url="https://github.com/acme/shop/actions/runs/42",
    )


FORMATS: dict[str, Callable[[RunResult], str]] = {
    "junit.xml": junit.render,
    "summary.md": markdown.render,
    "report.html": html.render,
    "comment.md": _comment,
}
"""golden file suffix -> renderer."""


def golden_names() -> list[str]:
    return [f"{case}.{suffix}" for case in CASES for suffix in FORMATS]


def render_golden(name: str) -> str:
    case, _, suffix = name.partition(".")
    return FORMATS[suffix](CASES[case]())


def main() -> int:
    for name in golden_names():
        path = HERE / name
        text = render_golden(name)
        old = path.read_bytes().decode("utf-8") if path.exists() else None
        if old != text:
            path.write_bytes(text.encode("utf-8"))
            print(f"{'updated' if old is not None else 'created'} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
