"""The HTML report, statically: self-contained, CSP with the script's hash, escaped content."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import pytest
from golden.cases import INJECTED_SCRIPT, chaos_only, failing, hostile, passing

from flakestorm.reporters import html
from flakestorm.reporters import json as json_report
from flakestorm.reporters.html_matrix import DETAIL_LIMIT
from flakestorm.results.model import CellResult, InvariantInfo, PromptResult, ScenarioInfo, Status
from flakestorm.results.scoring import score_cells
from flakestorm.results.stream import read_streamed


class _Page(HTMLParser):
    """Tags, attributes and inline scripts of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        self._in_title = tag == "title"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        if self._in_title:
            self.title += data


def _page(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


def test_one_inline_script_allowed_by_its_hash_and_nothing_else() -> None:
    page = _page(html.render(failing()))
    assert len(page.scripts) == 1
    assert [a for t, a in page.tags if t == "script"] == [{}]  # no src
    (csp,) = [
        a["content"] for t, a in page.tags if a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp is not None
    digest = base64.b64encode(hashlib.sha256(page.scripts[0].encode()).digest()).decode()
    assert csp == (
        f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    # the CSP comes before anything that could load or run
    assert page.tags[:3] == [
        ("html", {"lang": "en"}),
        ("head", {}),
        ("meta", {"charset": "utf-8"}),
    ]
    assert page.tags[3][1].get("http-equiv") == "Content-Security-Policy"


def test_no_url_leaves_the_file() -> None:
    for result in (passing(), failing(), hostile(), chaos_only()):
        page = _page(html.render(result))
        for tag, attrs in page.tags:
            for name in ("src", "href", "action", "srcset", "data", "poster"):
                value = attrs.get(name)
                assert value is None or value.startswith("#"), (tag, name, value)
            assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        assert {t for t, _ in page.tags} <= {
            "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "span",
            "dl", "dt", "dd", "strong", "p", "ul", "li", "main", "section", "div", "label",
            "input", "table", "thead", "tbody", "tr", "th", "td", "a", "article", "pre", "script",
            "svg", "path", "circle",  # the status glyphs
        }  # fmt: skip


def test_status_glyphs_are_inline_svg_not_emoji() -> None:
    text = html.render(failing())
    # no emoji a machine without an emoji font would show as empty boxes
    assert not re.search("[\u2190-\u2bff\U0001f000-\U0001faff]", text)
    for kind in ("passed", "failed", "errored", "flaky", "skipped", "not_run"):
        assert f'<svg class="glyph {kind}" viewBox="0 0 16 16" role="img"' in text, kind
    # a flaky failure shows both glyphs, in the matrix and on its cell
    assert text.count('<svg class="glyph failed"') >= 2
    assert '<a href="#contract-cell-5"><svg class="glyph failed"' in text


def test_hostile_content_is_escaped_text() -> None:
    text = html.render(hostile())
    page = _page(text)
    assert page.title == "flakestorm report: ERROR 16.67"
    assert INJECTED_SCRIPT not in text
    assert "<script>x</script>" not in text and "</td>@org" not in text
    assert "beacon?q=&lt;script&gt;x&lt;/script&gt;|`c`&amp;a=" in text  # the call's URL
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in text
    assert "<img" not in text and "<iframe" not in text and "<link" not in text
    assert "\u202e" not in text and "\x1b" not in text and "\x00" not in text
    text.encode("utf-8")
    assert len(text) < 200_000  # the 2 MiB reply is cut
    assert "(2,098,074 characters)" in text


def test_matrix_filters_and_cells() -> None:
    text = html.render(failing())
    assert 'id="filter-failed"' in text and 'id="filter-critical"' in text
    rows = re.findall(
        r'<tr class="row" data-filterable data-bad="(\d)" data-severity="(\w+)">', text
    )
    assert rows == [
        ("1", "critical"),
        ("1", "high"),
        ("0", "low"),
        ("1", "medium"),  # the chaos phase
        ("0", "medium"),
    ]
    assert text.count('<article class="cell ') == 11
    assert 'href="#contract-cell-1"' in text and 'id="contract-cell-1"' in text
    assert 'href="#chaos-cell-0"' in text and 'id="chaos-cell-0"' in text
    assert "Warning: No reset_endpoint configured." in text
    assert "The run stopped early (max_invocations)" in text


def test_element_ids_are_unique() -> None:
    for result in (passing(), failing(), hostile(), chaos_only()):
        ids = Counter(a["id"] for _, a in _page(html.render(result)).tags if "id" in a)
        assert [i for i, n in ids.items() if n > 1] == []


def test_every_phase_has_a_score_a_matrix_and_a_scenarios_table() -> None:
    text = html.render(failing())
    assert '<dd id="contract-score">support-agent: 46.15 (failed)</dd>' in text
    assert '<dd id="chaos-score">50.00 (1 of 2 prompts passed)</dd>' in text
    assert '<section id="contract-matrix" class="matrix">' in text
    assert '<section id="chaos-matrix" class="matrix">' in text
    assert "<h2>Chaos: 50.00 (1 of 2 prompts passed)</h2>" in text
    assert (
        "<td><ul><li>tool orders_api: error</li><li>tool orders_api: slow</li></ul></td>\n"
        "<td><p>cells ran one at a time (no call showed forwarded attribution; tool_faults[0] "
        "error(503) on orders_api: probability 0.5)</p></td>"
    ) in text
    assert text.count('<table class="scenarios"') == 2
    only = html.render(chaos_only())
    assert 'id="contract-score"' not in only and 'id="contract-matrix"' not in only
    assert "<p>No phase ran.</p>" in html.render(dataclasses.replace(chaos_only(), phases={}))


def test_undelivered_faults_are_flagged_at_the_top_and_on_the_scenario() -> None:
    text = html.render(chaos_only())
    header = text[: text.index("</header>")]
    assert '<div class="undelivered" id="undelivered">' in header
    assert (
        "<li>the chaos phase: tool_faults[0] error(503) on flight_search — the agent made no call "
        "to `flight_search` through flakestorm — is its base URL"
    ) in header
    undelivered = '<svg class="glyph undelivered" viewBox="0 0 16 16" role="img" aria-label='
    assert (
        '<th class="undelivered" title="tool flight_search: error; llm: truncated_response">'
        f"chaos {undelivered}"
    ) in text
    assert "</svg> next to a scenario: a declared fault was not delivered" in text
    assert "</svg> not delivered: tool_faults[0] error(503) on flight_search</p>" in text
    assert "🚫" not in text
    assert 'id="undelivered"' not in html.render(failing())
    hostile_header = html.render(hostile()).split("</header>")[0]
    assert (
        ", scenario <strong>dead|`x`&lt;/th&gt;&lt;img src=x&gt;</strong>: tool_faults[0] "
        "error(503) on ev`il&lt;/td&gt;@org|x — the agent"
    ) in hostile_header


def test_every_call_of_a_cell_is_listed() -> None:
    text = html.render(failing())
    cell = text[text.index('id="contract-cell-1"') : text.index('id="contract-cell-2"')]
    assert '<div class="label">calls through flakestorm (5)</div>' in cell
    assert cell.count('<tr class="call') == 5 and cell.count('<tr class="call fired">') == 3
    assert (
        '<td class="url">http://127.0.0.1:8080/tools/orders_api/orders/42</td>\n'
        '<td class="num">502</td>\n<td>tool_faults[1] slow(2000 ms) on orders_api</td>\n'
        "<td>connection refused: orders.internal:443</td>"
    ) in cell
    assert '<td class="num">no reply</td>' in cell
    chaos = text[text.index('id="chaos-cell-0"') :]
    assert '<div class="label">calls through flakestorm (3)</div>' in chaos


def test_the_template_ships_inside_the_package() -> None:
    assert (html.TEMPLATES / "report.html.j2").is_file()
    assert (html.TEMPLATES / "report.js").is_file()
    assert html.TEMPLATES.parent.name == "reporters"


def test_a_large_phase_shows_its_failed_cells_in_detail_and_says_how_many_it_leaves_out(
    tmp_path: Path,
) -> None:
    invariants, scenarios = 3, DETAIL_LIMIT // 2  # more cells than the report details

    def cell(index: int) -> CellResult:
        failed = index % 7 == 0
        reason = "<b>no refund</b> & more" if failed else "contains 'refund'"
        reply = PromptResult("refund?", "refund?", 0, not failed, reason, f"reply {index}", 1.0)
        return CellResult(
            index, f"inv{index // scenarios}", f"s{index % scenarios}", "critical" if index < 30
            else "low", Status.FAILED if failed else Status.PASSED, reason, prompts=(reply,),
        )  # fmt: skip

    cells = tuple(cell(i) for i in range(invariants * scenarios))
    contract = dataclasses.replace(
        passing().phases["contract"],
        invariants=tuple(
            InvariantInfo(f"inv{i}", "contains", "low", "always", False, None, i)
            for i in range(invariants)
        ),
        scenarios=tuple(ScenarioInfo(f"s{s}", ()) for s in range(scenarios)),
        cells=cells,
        score=score_cells(cells),
    )
    result = dataclasses.replace(passing(), phases={"contract": contract})
    text = html.render(result)
    failed = [c.index for c in cells if c.status is Status.FAILED]
    page = _page(text)
    shown = [a["id"] for t, a in page.tags if t == "article"]
    assert shown == [f"contract-cell-{i}" for i in failed]  # in matrix order
    assert f"reply {failed[-1]}" in text and f"reply {failed[-1] + 1}" not in text
    tds = [a for t, a in page.tags if t == "td" and a.get("data-status")]
    assert len(tds) == len(cells)  # the matrix keeps every cell…
    assert tds[0]["title"] == "failed: <b>no refund</b> & more"  # …its reason as text
    links = [a["href"] for t, a in page.tags if t == "a" and a.get("href", "").startswith("#")]
    assert links == [f"#contract-cell-{i}" for i in failed]  # …and links to what is shown
    more = len(cells) - len(failed)
    assert f"{more:,} more cells are not shown in detail" in text
    assert "<b>no refund</b>" not in text
    # read back from results.json, its cells spooled, as `flakestorm report` and merge read it
    document = io.StringIO()
    json_report.write(result, document)
    document.seek(0)
    assert html.render(read_streamed(document, tmp_path)) == text


def test_the_template_is_compiled_once_and_a_cache_it_cannot_use_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report's template is compiled once and kept (like a module's bytecode): a later
    process renders from what was kept without compiling it again. Where nothing can be kept
    (the directory is a file, say), the report is rendered as before."""
    result = failing()
    expected = html.render(result)
    kept = tmp_path / "kept"
    monkeypatch.setattr(html, "TEMPLATES_CACHE", kept)
    html._environment.cache_clear()
    assert html.render(result) == expected
    assert [p.suffix for p in kept.iterdir()] == [".jinja"]
    html._environment.cache_clear()  # a new process: its own environment, the cache on disk
    monkeypatch.setattr(
        jinja2.Environment, "compile", lambda *a, **k: pytest.fail("compiled again")
    )
    assert html.render(result) == expected
    monkeypatch.undo()
    unusable = tmp_path / "a-file"
    unusable.write_text("not a directory")
    monkeypatch.setattr(html, "TEMPLATES_CACHE", unusable)
    html._environment.cache_clear()
    try:
        assert html.render(result) == expected
    finally:
        monkeypatch.undo()
        html._environment.cache_clear()
