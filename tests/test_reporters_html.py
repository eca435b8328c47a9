"""The HTML report, statically: self-contained, CSP with the script's hash, escaped content."""

from __future__ import annotations

import base64
import hashlib
import re
from html.parser import HTMLParser

from golden.cases import INJECTED_SCRIPT, failing, hostile, passing

from flakestorm.reporters import html


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
    for result in (passing(), failing(), hostile()):
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
        }  # fmt: skip


def test_hostile_content_is_escaped_text() -> None:
    text = html.render(hostile())
    page = _page(text)
    assert page.title == "flakestorm report: FAIL 25.00"
    assert INJECTED_SCRIPT not in text
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
    assert rows == [("1", "critical"), ("1", "high"), ("0", "low")]
    assert text.count('<article class="cell ') == 9
    assert 'href="#cell-1"' in text and 'id="cell-1"' in text
    assert "Warning: No reset_endpoint configured." in text
    assert "The run stopped early (max_invocations)" in text


def test_the_template_ships_inside_the_package() -> None:
    assert (html.TEMPLATES / "report.html.j2").is_file()
    assert (html.TEMPLATES / "report.js").is_file()
    assert html.TEMPLATES.parent.name == "reporters"
