"""The HTML report in a real browser (headless chromium, ``--dump-dom`` and ``--screenshot``).

Chromium comes from ``scripts/ensure-chromium`` (Debian's ``chromium`` via apt-get when it is
missing); these tests skip, saying why, only when no browser can be found or installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from golden.cases import chaos_only, failing, hostile
from support.png import Image, read_png
from support.server import LoopbackServer
from support.unavailable import unavailable

from flakestorm.reporters import html

ROOT = Path(__file__).resolve().parent.parent
BROWSERS = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome")


def _find_browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def browser() -> str:
    path = _find_browser()
    if path is None:
        script = ROOT / "scripts" / "ensure-chromium"
        done = subprocess.run(
            ["bash", str(script)], capture_output=True, text=True, timeout=900, check=False
        )
        path = _find_browser()
        if path is None:
            reason = done.stderr.strip() or "no chromium on PATH"
            print(f"skipping browser tests: {reason}")
            unavailable("chromium", reason)
    return path


def _chromium(browser: str, profile: Path) -> list[str]:
    return [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=2000",
    ]


def dump_dom(browser: str, page: Path, fragment: str = "", profile: Path | None = None) -> str:
    """The DOM of ``page`` after its scripts ran."""
    profile = profile or page.parent / f"profile-{time.monotonic_ns()}"
    command = [*_chromium(browser, profile), "--dump-dom", page.as_uri() + fragment]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout


class _Dom(HTMLParser):
    """What the tests look at in a dumped DOM."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.body: dict[str, str | None] = {}
        self.rows: list[dict[str, str | None]] = []
        self.articles: list[dict[str, str | None]] = []
        self.tags: set[str] = set()
        self.ids: set[str] = set()
        self.filter_count = ""
        self._in: str | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.tags.add(tag)
        if values.get("id"):
            self.ids.add(str(values["id"]))
        if tag == "body":
            self.body = values
        elif tag == "tr" and values.get("class") == "row":
            self.rows.append(values)
        elif tag == "article":
            self.articles.append(values)
        self._in = tag if tag == "title" else values.get("id")

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "title":
            self.title += data
        elif self._in == "filter-count":
            self.filter_count += data

    def visible(self, items: list[dict[str, str | None]]) -> list[dict[str, str | None]]:
        return [i for i in items if "hidden" not in i]


@pytest.fixture
def failing_report(tmp_path: Path) -> Path:
    path = tmp_path / "report.html"
    path.write_text(html.render(failing()), encoding="utf-8")
    return path


def test_the_matrix_and_the_failed_cells_render(browser: str, failing_report: Path) -> None:
    dom = _Dom(dump_dom(browser, failing_report))
    assert dom.title == "flakestorm report: ERROR 48.08"
    assert dom.body.get("data-filter") == "none"  # the script ran (CSP allowed it)
    assert len(dom.visible(dom.rows)) == 5  # 3 contract rows, 2 chaos rows
    assert len(dom.visible(dom.articles)) == 11
    bad = [a["id"] for a in dom.articles if a.get("data-bad") == "1"]
    assert bad == ["contract-cell-1", "contract-cell-4", "contract-cell-5", "chaos-cell-0"]
    assert dom.filter_count == ""


@pytest.mark.parametrize(
    ("fragment", "rows", "cells"),
    [
        (
            "#failed",
            ["critical", "high", "medium"],
            ["contract-cell-1", "contract-cell-4", "contract-cell-5", "chaos-cell-0"],
        ),
        ("#critical", ["critical"], ["contract-cell-0", "contract-cell-1", "contract-cell-2"]),
        ("#failed+critical", ["critical"], ["contract-cell-1"]),
    ],
)
def test_the_url_hash_applies_a_filter(
    browser: str, failing_report: Path, fragment: str, rows: list[str], cells: list[str]
) -> None:
    dom = _Dom(dump_dom(browser, failing_report, fragment))
    assert dom.body.get("data-filter") == fragment[1:].replace("+", " ")
    assert [r["data-severity"] for r in dom.visible(dom.rows)] == rows
    assert [a["id"] for a in dom.visible(dom.articles)] == cells
    assert dom.filter_count == f"{len(cells)} cells shown"


def test_injected_markup_never_runs_and_nothing_leaves_the_file(
    browser: str, tmp_path: Path
) -> None:
    with LoopbackServer() as server:
        beacon = server.url_for("/beacon")
        # control: the harness does see a page that loads from the server
        control = tmp_path / "control.html"
        control.write_text(f'<html><body><img src="{beacon}?control"></body></html>')
        dump_dom(browser, control)
        assert any("control" in r.path for r in server.requests), "the control beacon was lost"

        seen = len(server.requests)
        report = tmp_path / "report.html"
        report.write_text(html.render(hostile(beacon=beacon)), encoding="utf-8")
        text = dump_dom(browser, report)
        time.sleep(0.2)
        assert server.requests[seen:] == []

    dom = _Dom(text)
    assert dom.title == "flakestorm report: ERROR 16.67"  # not 'pwned'
    assert dom.body.get("data-filter") == "none"  # our script still ran
    assert not {"img", "iframe", "link"} & dom.tags
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in text
    assert "&lt;img src=x onerror=" in text
    # the hostile call URL (it carries the beacon) is text in its cell
    assert f"javascript:alert(1)//{beacon}?q=&lt;script&gt;x&lt;/script&gt;" in text


def test_a_chaos_only_report_filters_its_cells(browser: str, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    report.write_text(html.render(chaos_only()), encoding="utf-8")
    dom = _Dom(dump_dom(browser, report, "#failed"))
    assert dom.title == "flakestorm report: ERROR 0.00"
    assert dom.body.get("data-filter") == "failed"  # the script ran without a contract
    assert [a["id"] for a in dom.visible(dom.articles)] == ["chaos-cell-0", "chaos-cell-1"]
    assert "undelivered" in dom.ids


def test_the_csp_blocks_markup_even_if_escaping_failed(browser: str, tmp_path: Path) -> None:
    with LoopbackServer() as server:
        beacon = server.url_for("/beacon")
        page = html.render(failing())
        injected = (
            f'<img src="{beacon}?img"><script>document.title="pwned";'
            f'fetch("{beacon}?fetch")</script><link rel="stylesheet" href="{beacon}?css">'
            f'<iframe src="{beacon}?frame"></iframe><img src=x onerror="document.title=1">'
        )
        # what a broken escaper would produce: raw markup inside a reply
        assert page.count('<pre class="reply">') > 1
        page = page.replace('<pre class="reply">', f'<pre class="reply">{injected}', 1)
        report = tmp_path / "report.html"
        report.write_text(page, encoding="utf-8")
        text = dump_dom(browser, report)
        time.sleep(0.2)
        assert server.requests == []
    dom = _Dom(text)
    assert dom.title == "flakestorm report: ERROR 48.08"
    assert dom.body.get("data-filter") == "none"


# --------------------------------------------------------------------------- status glyphs

GLYPH_PX = 64
GLYPH_STEP_PX = 80
KINDS = ("passed", "failed", "errored", "flaky", "skipped", "not_run", "undelivered")


def screenshot(browser: str, page: Path, width: int, height: int) -> Image:
    """``page`` as the browser paints it."""
    shot = page.with_suffix(".png")
    profile = page.parent / f"profile-{time.monotonic_ns()}"
    command = [
        *_chromium(browser, profile),
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--window-size={width},{height}",
        f"--screenshot={shot}",
        page.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    return read_png(shot)


def _ink(image: Image, left: int) -> tuple[frozenset[tuple[int, int]], tuple[float, float, float]]:
    """The pixels of the box at ``left`` that are not the white page, and their mean colour."""
    ink = set()
    total = [0, 0, 0]
    for y in range(GLYPH_PX):
        for x in range(left, left + GLYPH_PX):
            r, g, b = image.pixel(x, y)
            if min(r, g, b) < 200:
                ink.add((x - left, y))
                total = [total[0] + r, total[1] + g, total[2] + b]
    n = max(len(ink), 1)
    return frozenset(ink), (total[0] / n, total[1] / n, total[2] / n)


def test_status_glyphs_paint_distinct_coloured_shapes_without_an_emoji_font(
    browser: str, tmp_path: Path
) -> None:
    """The report's own glyph markup and stylesheet, painted side by side and read back from
    the screenshot: each glyph has ink, in its status colour, and no two look alike (emoji
    without a font would paint nothing, or the same empty box for every status)."""
    report = html.render(failing())
    style = re.search(r"<style>.*?</style>", report, re.S)
    assert style is not None
    both = report + html.render(chaos_only())  # this one has a fault not delivered
    boxes = []
    for i, kind in enumerate(KINDS):
        match = re.search(f'<svg class="glyph {kind}".*?</svg>', both, re.S)
        assert match is not None, kind
        boxes.append(f'<div style="left:{i * GLYPH_STEP_PX}px">{match.group()}</div>')
    page = tmp_path / "glyphs.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        f"{style.group()}<style>body {{ margin: 0; padding: 0; background: #fff; }} "
        f"div {{ position: absolute; top: 0; width: {GLYPH_PX}px; height: {GLYPH_PX}px; }} "
        "div .glyph { width: 100%; height: 100%; vertical-align: top; }</style></head>"
        f"<body>{''.join(boxes)}</body></html>",
        encoding="utf-8",
    )
    image = screenshot(browser, page, GLYPH_STEP_PX * len(KINDS), GLYPH_STEP_PX * 2)
    painted = {kind: _ink(image, i * GLYPH_STEP_PX) for i, kind in enumerate(KINDS)}
    for kind, (ink, _) in painted.items():
        assert len(ink) > GLYPH_PX * GLYPH_PX // 10, f"{kind} paints almost nothing"
    shapes = [ink for ink, _ in painted.values()]
    assert len(set(shapes)) == len(KINDS), "two glyphs paint the same shape"

    def hue(kind: str) -> str:
        r, g, b = painted[kind][1]
        if max(r, g, b) - min(r, g, b) < 30:
            return "grey"
        if g > r and g > b:
            return "green"
        if r > g + 80 and r > b + 80:
            return "red"
        if b > g + 60 and r > g + 20:
            return "purple"
        return "amber" if r > b + 40 and g > b + 40 else "other"

    assert {kind: hue(kind) for kind in KINDS} == {
        "passed": "green",
        "failed": "red",
        "errored": "purple",
        "flaky": "amber",
        "skipped": "grey",
        "not_run": "grey",
        "undelivered": "red",
    }


def test_the_trend_chart_paints_its_runs(browser: str, tmp_path: Path) -> None:
    """The score's trend as the report draws it: the chart is in the rendered DOM, and painted,
    each run a dot on the line at its score, this run in its own colour."""
    import dataclasses

    from flakestorm.baseline.delta import FailOn
    from flakestorm.baseline.judgement import Judgement
    from flakestorm.reporters.trend_chart import chart
    from flakestorm.results.trend import Trend, TrendPoint

    points = [
        TrendPoint(f"2026-10-0{i}", "abc1234", s, "PASS") for i, s in enumerate([96, 92, 88], 1)
    ]
    trend = Trend((*points, TrendPoint("2026-10-04", "", 90.0, "PASS", current=True)), "main")
    result = failing()
    result = dataclasses.replace(result, step=Judgement(FailOn.ANY, trend=trend).document(result))
    report = tmp_path / "report.html"
    report.write_text(html.render(result), encoding="utf-8")
    dom = _Dom(dump_dom(browser, report))
    assert "trend" in dom.ids and {"svg", "polyline", "circle"} <= dom.tags
    drawn = chart(trend)
    assert drawn is not None
    svg = re.search(r"<svg xmlns=.*?</svg>", report.read_text(encoding="utf-8"), re.S)
    assert svg is not None
    page = tmp_path / "chart.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><style>body { margin: 0; '
        f"background: #fff; color: #000; }} svg {{ display: block; }}</style></head><body>"
        f"{svg.group()}</body></html>",
        encoding="utf-8",
    )
    image = screenshot(browser, page, drawn.width, drawn.height)
    *runs, current = drawn.dots
    for dot in runs:
        r, g, b = image.pixel(round(dot.x), round(dot.y))
        assert max(r, g, b) < 90, (dot, (r, g, b))  # a dark dot on the line
    r, g, b = image.pixel(round(current.x), round(current.y))
    assert r > 180 and 80 < g < 160 and b < 60, (r, g, b)  # this run: amber
    assert image.pixel(drawn.width // 2, 4) == (255, 255, 255)  # no ink above the line
